from agentrl_calculator.server import main

main()
