// agentrl job page: charts from metrics.jsonl lines, live polling, and the report's client-side explorer.
// Used by the live page (served from agentrl/ui/static) and inlined into `agentrl report` files.
// Draws with Plotly (its bundle comes from the installed plotly package; nothing is fetched from a CDN).
"use strict";

const AR = (function () {
  const num = (v) => typeof v === "number" && isFinite(v);
  const fmt = (v, d = 3) => (num(v) ? (Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(2) : v.toFixed(d)) : "n/a");

  function col(lines, key) {
    const x = [], y = [];
    for (const l of lines) if (num(l[key])) { x.push(l.step); y.push(l[key]); }
    return { x, y };
  }

  // TensorBoard's debiased exponential moving average
  function ema(y, w) {
    if (!w) return y.slice();
    let last = 0, n = 0;
    return y.map((v) => { last = last * w + (1 - w) * v; n += 1; return last / (1 - Math.pow(w, n)); });
  }

  function line(name, c, extra) { return Object.assign({ name, x: c.x, y: c.y, type: "scatter", mode: c.x.length < 40 ? "lines+markers" : "lines" }, extra || {}); }

  function smoothed(name, c, w, color) {
    if (!w) return [line(name, c, { line: { color } })];
    return [line(name + " (raw)", c, { line: { color, width: 1 }, opacity: 0.3, showlegend: false, hoverinfo: "skip" }),
            line(name, { x: c.x, y: ema(c.y, w) }, { line: { color } })];
  }

  // validation reward keys: agentrl's own val/reward_mean and val/reward/<component> when metrics.jsonl has
  // them, else verl's val-core/<data source>/reward/mean@N
  function valKeys(L) {
    const all = [...new Set(L.flatMap((l) => Object.keys(l).filter((k) => /^val[-/_]/.test(k) && /(reward|score)/.test(k))))].sort();
    const ours = all.filter((k) => k.startsWith("val/"));
    return ours.length ? ours : all;
  }

  const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"];

  // rollout steps are the weights version a rollout was generated with; the trainer step that used them is
  // one later when the rollout file's last training step is behind metrics.jsonl's last step
  function rolloutShift(lines, steps) {
    const train = steps.filter((s) => !s.validation);
    if (!train.length || !lines.length) return 0;
    const lastRoll = Math.max(...train.map((s) => s.step));
    return lastRoll < lines[lines.length - 1].step ? 1 : 0;
  }

  const CHARTS = [
    { id: "reward", title: "Reward: mean ± std of scored rollouts, each component; unscorable count (bars)", build(L, S, o) {
      const m = col(L, "reward_mean"), sd = col(L, "reward_std");
      const sdBy = Object.fromEntries(sd.x.map((x, i) => [x, sd.y[i]]));
      const hi = m.x.map((x, i) => m.y[i] + (sdBy[x] || 0)), lo = m.x.map((x, i) => m.y[i] - (sdBy[x] || 0));
      const band = { mode: "lines", line: { width: 0 }, hoverinfo: "skip" };
      const t = [line("mean + std", { x: m.x, y: hi }, Object.assign({ showlegend: false }, band)),
                 line("± std", { x: m.x, y: lo }, Object.assign({ fill: "tonexty", fillcolor: "rgba(31,119,180,0.12)" }, band))];
      t.push(...smoothed("reward mean", m, o.smooth, COLORS[0]));
      const comps = [...new Set(L.flatMap((l) => Object.keys(l).filter((k) => k.startsWith("reward/"))))].sort();
      comps.forEach((k, i) => t.push(line(k.slice(7), col(L, k), { line: { color: COLORS[(i + 1) % COLORS.length], dash: "dot" } })));
      const u = col(L, "unscorable"), most = Math.max(1, ...u.y);
      t.push({ name: "unscorable", x: u.x, y: u.y, type: "bar", yaxis: "y2", marker: { color: "rgba(214,39,40,0.25)" }, width: 0.3 });
      return { traces: t, layout: { yaxis2: { overlaying: "y", side: "right", title: "unscorable", rangemode: "tozero", showgrid: false, tickformat: "d", range: [0, most * 1.1], dtick: Math.max(1, Math.ceil(most / 4)) } } };
    } },
    { id: "response_length", title: "Response length (tokens): mean, min, max", build(L) {
      return { traces: [line("mean", col(L, "response_length")), line("max", col(L, "response_length/max"), { line: { dash: "dot" } }),
                        line("min", col(L, "response_length/min"), { line: { dash: "dot" } })] };
    } },
    { id: "kl", title: "KL: the loss term against the reference model, and PPO's KL to the rollout policy", build(L, S, o) {
      const ppo = col(L, "ppo_kl").x.length ? col(L, "ppo_kl") : col(L, "kl");  // "kl" in runs from before the rename
      return { traces: [line("kl_loss (vs. reference)", col(L, "kl_loss")), ...smoothed("ppo_kl (vs. rollout policy)", ppo, o.smooth, COLORS[0])] };
    } },
    { id: "advantages", title: "Advantages: mean, min, max; share of groups with no reward spread (right axis)", build(L) {
      const z = col(L, "frac_reward_zero_std");
      const t = [line("mean", col(L, "advantages_mean")), line("max", col(L, "advantages_max"), { line: { dash: "dot" } }),
                 line("min", col(L, "advantages_min"), { line: { dash: "dot" } })];
      if (z.x.length) t.push(line("groups with equal rewards", z, { yaxis: "y2", line: { color: COLORS[3], dash: "dash" } }));
      return { traces: t, layout: { yaxis2: { overlaying: "y", side: "right", range: [0, 1.05], showgrid: false, tickformat: ".0%" } } };
    } },
    { id: "tool_calls", title: "Tool calls per rollout", build(L) {
      return { traces: [line("tool calls / rollout", col(L, "tool_calls_per_rollout"))] };
    } },
    { id: "staleness", title: "Staleness: policy updates between generating a rollout and training on it (bars: rollouts per value)", build(L) {
      const hist = L.filter((l) => num(l.staleness_max));
      const values = [...new Set(hist.flatMap((l) => Object.keys(l).filter((k) => k.startsWith("staleness/")).map((k) => k.slice(10))))]
        .sort((a, b) => a - b);
      const t = values.map((v, i) => ({ name: `${v} behind`, x: hist.map((l) => l.step), y: hist.map((l) => l["staleness/" + v] || 0),
                                        type: "bar", yaxis: "y2", marker: { color: COLORS[i % COLORS.length], opacity: 0.35 } }));
      t.push(line("mean", col(L, "staleness_mean")), line("max", col(L, "staleness_max"), { line: { dash: "dot" } }));
      return { traces: hist.length ? t : [], empty: "on-policy run (set agentrl.max_off_policy_steps to train off-policy)",
               layout: { barmode: "stack", yaxis2: { overlaying: "y", side: "right", title: "rollouts", rangemode: "tozero", showgrid: false } } };
    } },
    { id: "validation", title: "Validation reward", build(L, S) {
      const keys = valKeys(L);
      const t = keys.map((k) => line(k, col(L, k)));
      const v = S.filter((s) => s.validation && num(s.reward_mean));
      if (v.length) t.push(line("validation rollouts (mean)", { x: v.map((s) => s.step), y: v.map((s) => s.reward_mean) }, { line: { dash: "dot" } }));
      return { traces: t, empty: "no validation yet (set agentrl.val_data to validate every save_every steps)" };
    } },
    { id: "loss", title: "Loss (EMA-smoothed; raw faint)", build(L, S, o) {
      return { traces: [...smoothed("loss", col(L, "loss"), o.smooth, COLORS[0]), ...smoothed("pg_loss", col(L, "pg_loss"), o.smooth, COLORS[1])] };
    } },
    { id: "entropy", title: "Entropy", build(L, S, o) { return { traces: smoothed("entropy", col(L, "entropy"), o.smooth, COLORS[2]) }; } },
    { id: "grad_norm", title: "Gradient norm", build(L, S, o) { return { traces: smoothed("grad norm", col(L, "grad_norm"), o.smooth, COLORS[3]) }; } },
    { id: "lr", title: "Learning rate", build(L) { return { traces: [line("lr", col(L, "learning_rate"))] }; } },
    { id: "step_time", title: "Step time (s): generation, tools, rewards, update, other", build(L, S) {
      const shift = rolloutShift(L, S);
      const roll = Object.fromEntries(S.filter((s) => !s.validation).map((s) => [s.step + shift, s]));
      const parts = { generation: [], tools: [], rewards: [], update: [], other: [] }, x = [];
      for (const l of L) {
        if (!num(l.step_time)) continue;
        const gen = num(l.generation_time) ? l.generation_time : 0, upd = num(l.update_time) ? l.update_time : 0;
        const r = roll[l.step], total = r && r.seconds > 0 ? r.seconds : 0;
        const tools = total ? gen * r.tool_seconds / total : 0, rewards = total ? gen * r.reward_seconds / total : 0;
        x.push(l.step);
        parts.generation.push(gen - tools - rewards); parts.tools.push(tools); parts.rewards.push(rewards);
        parts.update.push(upd); parts.other.push(Math.max(0, l.step_time - gen - upd));
      }
      return { traces: Object.entries(parts).map(([k, y], i) => ({ name: k, x, y, type: "bar", marker: { color: COLORS[i] } })),
               layout: { barmode: "stack" } };
    } },
  ];

  function drawCharts(root, lines, steps, o) {
    const lo = num(o.from) ? o.from : -Infinity, hi = num(o.to) ? o.to : Infinity;
    // validation lines ("validation": true, keys val/...) only feed the validation chart, which reads val keys
    const L = lines.filter((l) => l.step >= lo && l.step <= hi), S = steps.filter((s) => s.step >= lo && s.step <= hi);
    for (const c of CHARTS) {
      let box = root.querySelector(`[data-chart="${c.id}"]`);
      if (!box) {
        box = document.createElement("div"); box.className = "chart"; box.dataset.chart = c.id;
        box.innerHTML = `<h3>${c.title}</h3><div class="plot"></div><p class="empty"></p>`;
        root.appendChild(box);
      }
      const fig = c.build(L, S, o), points = fig.traces.reduce((n, t) => n + (t.x ? t.x.length : 0), 0);
      box.dataset.points = points;
      box.querySelector(".empty").textContent = points ? "" : (fig.empty || "no data yet");
      const layout = Object.assign({ margin: { l: 50, r: 50, t: 10, b: 35 }, height: 260, xaxis: { title: "step" },
                                     legend: { orientation: "h", y: -0.25 }, hovermode: "x unified" }, fig.layout || {});
      // a constant series (a fixed learning rate): Plotly would pad it by ±1; show 0..2x instead
      const ys = fig.traces.filter((t) => t.yaxis !== "y2" && t.y).flatMap((t) => t.y).filter(num);
      if (ys.length && Math.min(...ys) === Math.max(...ys) && ys[0] !== 0)
        layout.yaxis = Object.assign({}, layout.yaxis, { range: ys[0] > 0 ? [0, 2 * ys[0]] : [2 * ys[0], 0], exponentformat: "e" });
      Plotly.react(box.querySelector(".plot"), fig.traces, layout, { displaylogo: false, responsive: true });
    }
  }

  function clock(s) {
    if (!num(s)) return "";
    s = Math.round(s); const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), x = s % 60;
    return (h ? h + ":" + String(m).padStart(2, "0") : m) + ":" + String(x).padStart(2, "0");
  }
  const when = (t) => (num(t) ? new Date(t * 1000).toLocaleString() : "");

  function setText(sel, text) { document.querySelectorAll(sel).forEach((e) => { e.textContent = text; }); }

  function showInfo(info) {
    setText("[data-f=status]", info.status);
    document.querySelectorAll("[data-f=status]").forEach((e) => { e.className = "status " + info.status; });
    setText("[data-f=progress]", `step ${info.step}/${info.total ?? "?"}` + (num(info.percent) ? ` (${info.percent}%)` : ""));
    setText("[data-f=eta]", info.status === "running" && num(info.eta_seconds) ? "ETA " + clock(info.eta_seconds) : "");
    setText("[data-f=summary]", info.summary);
    setText("[data-f=reward]", fmt(info.reward));
    setText("[data-f=started]", info.started ? "started " + when(info.started) : "");
    setText("[data-f=ended]", info.ended && info.status !== "running" ? "ended " + when(info.ended) : "");
    setText("[data-f=detail]", info.detail || "");
    document.querySelectorAll("[data-f=bar]").forEach((e) => { e.style.width = (info.percent || 0) + "%"; });
  }

  function showSnapshot(lines, steps) {
    const train = lines.filter((l) => !l.validation);
    const last = train.length ? train[train.length - 1] : {};
    const keys = valKeys(lines), main = keys.includes("val/reward_mean") ? ["val/reward_mean"] : keys;
    const vals = lines.flatMap((l) => main.filter((k) => num(l[k])).map((k) => [l.step, k, l[k]]));
    const v = vals.length ? vals[vals.length - 1] : null;
    const vr = steps.filter((s) => s.validation && num(s.reward_mean));
    setText("[data-f=eval_reward]", v ? `${fmt(v[2])} (${v[1]}, step ${v[0]})` : vr.length ? `${fmt(vr[vr.length - 1].reward_mean)} (validation rollouts, step ${vr[vr.length - 1].step})` : "no validation yet");
    setText("[data-f=train_reward]", fmt(last.reward_mean));
    setText("[data-f=resp_len]", fmt(last.response_length, 1));
    setText("[data-f=adv]", `${fmt(last.advantages_mean)} (min ${fmt(last.advantages_min)}, max ${fmt(last.advantages_max)})`);
    // the learning-signal warning metrics.jsonl carries on steps that taught nothing
    const silent = train.filter((l) => l.warning);
    setText("[data-f=signal]", silent.length ? `warning: ${silent.length} of ${train.length} steps had no learning signal` +
      ` (last: step ${silent[silent.length - 1].step}${last.warning ? ", the latest step" : ""}): ${silent[silent.length - 1].warning}` : "");
  }

  function showCheckpoints(list) {
    const body = document.querySelector("#checkpoints tbody");
    const key = JSON.stringify(list);
    if (!body || body.dataset.key === key) return;  // unchanged: keep an opened export command open
    body.dataset.key = key;
    body.innerHTML = "";
    for (const c of list) {
      const tr = document.createElement("tr");
      tr.innerHTML = `<td>${c.step}</td><td>${c.complete ? "complete" : "in progress"}</td><td>${c.files}</td><td>${(c.bytes / 2 ** 20).toFixed(1)} MiB</td>` +
        `<td><button type="button">export command</button> <code class="cmd" hidden></code></td>`;
      tr.querySelector("code").textContent = c.export;
      tr.querySelector("button").onclick = () => { const code = tr.querySelector("code"); code.hidden = false;
        if (navigator.clipboard) navigator.clipboard.writeText(c.export).catch(() => {}); };
      body.appendChild(tr);
    }
    if (!list.length) body.innerHTML = "<tr><td colspan=5>no checkpoint yet</td></tr>";
  }

  // the live run page: polls the state endpoint, appends new metric lines, redraws
  function live(opts) {
    const state = { lines: [], steps: [], offset: 0 };
    const root = document.getElementById("charts");
    const ctl = () => ({ smooth: parseFloat(document.getElementById("smooth").value) || 0,
                         from: parseFloat(document.getElementById("from").value), to: parseFloat(document.getElementById("to").value) });
    const redraw = () => drawCharts(root, state.lines, state.steps, ctl());
    ["smooth", "from", "to"].forEach((id) => document.getElementById(id).addEventListener("input", redraw));
    document.getElementById("reset").onclick = () => { document.getElementById("from").value = ""; document.getElementById("to").value = ""; redraw(); };
    async function poll() {
      try {
        const r = await fetch(`${opts.api}?offset=${state.offset}`);
        if (r.ok) {
          const s = await r.json();
          if (s.offset < state.offset) state.lines = [];  // metrics.jsonl was rewritten
          state.lines.push(...s.metrics); state.offset = s.offset; state.steps = s.steps;
          showInfo(s.info); showSnapshot(state.lines, state.steps); showCheckpoints(s.checkpoints);
          const log = document.getElementById("log");
          const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 5;
          log.textContent = s.log.join("\n");
          if (atEnd) log.scrollTop = log.scrollHeight;
          setText("[data-f=updated]", new Date().toLocaleTimeString());
          redraw();
          document.body.dataset.polls = (parseInt(document.body.dataset.polls || "0") + 1).toString();
        }
      } catch (e) { setText("[data-f=updated]", "server unreachable: " + e); }
      setTimeout(poll, opts.interval || 3000);
    }
    poll();
  }

  function runList(api) {
    async function poll() {
      try {
        const runs = await (await fetch(api)).json();
        const body = document.querySelector("#runs tbody"), key = JSON.stringify(runs);
        if (body.dataset.key === key) { setTimeout(poll, 5000); return; }  // unchanged: leave the table be
        body.dataset.key = key;
        body.innerHTML = "";
        for (const r of runs) {
          const tr = document.createElement("tr");
          tr.innerHTML = `<td><a></a></td><td><span class="status ${r.status}">${r.status}</span></td>` +
            `<td><div class="bar"><div style="width:${r.percent || 0}%"></div></div> ${r.step}/${r.total ?? "?"}</td>` +
            `<td>${fmt(r.reward)}</td><td>${when(r.started)}</td><td>${r.status === "running" ? "ETA " + clock(r.eta_seconds) : when(r.ended)}</td>`;
          const a = tr.querySelector("a"); a.href = "runs/" + r.name.split("/").map(encodeURIComponent).join("/"); a.textContent = r.name;
          body.appendChild(tr);
        }
        if (!runs.length) body.innerHTML = "<tr><td colspan=6>no run directories here yet</td></tr>";
      } catch (e) { /* server gone: keep the last table */ }
      setTimeout(poll, 5000);
    }
    poll();
  }

  // the report: everything inlined, explorer filtered in the page
  function report(data) {
    const root = document.getElementById("charts");
    const ctl = () => ({ smooth: parseFloat(document.getElementById("smooth").value) || 0,
                         from: parseFloat(document.getElementById("from").value), to: parseFloat(document.getElementById("to").value) });
    const redraw = () => drawCharts(root, data.metrics, data.steps, ctl());
    ["smooth", "from", "to"].forEach((id) => document.getElementById(id).addEventListener("input", redraw));
    document.getElementById("reset").onclick = () => { document.getElementById("from").value = ""; document.getElementById("to").value = ""; redraw(); };
    showInfo(data.info); showSnapshot(data.metrics, data.steps); showCheckpoints(data.checkpoints);
    setText("[data-f=updated]", "as of " + data.generated);
    redraw();
    const pick = document.getElementById("step-pick");
    const filt = () => {
      const f = Object.fromEntries(["rmin", "rmax", "uns", "tool", "q"].map((k) => [k, document.getElementById("f-" + k).value]));
      document.querySelectorAll(".step-block").forEach((b) => { b.hidden = b.dataset.key !== pick.value; });
      let shown = 0;
      document.querySelectorAll(`.step-block[data-key="${pick.value}"] .rollout`).forEach((r) => {
        const rew = r.dataset.reward === "" ? null : parseFloat(r.dataset.reward);
        let ok = true;
        if (f.rmin !== "" && (rew === null || rew < parseFloat(f.rmin))) ok = false;
        if (f.rmax !== "" && (rew === null || rew > parseFloat(f.rmax))) ok = false;
        if (f.uns === "only" && r.dataset.unscorable !== "1") ok = false;
        if (f.uns === "none" && r.dataset.unscorable === "1") ok = false;
        if (f.tool && !(r.dataset.tools || "").split(",").includes(f.tool)) ok = false;
        if (f.q && !r.textContent.toLowerCase().includes(f.q.toLowerCase())) ok = false;
        r.hidden = !ok; shown += ok ? 1 : 0;
      });
      setText("[data-f=shown]", shown + " shown");
    };
    pick.addEventListener("change", filt);
    ["rmin", "rmax", "uns", "tool", "q"].forEach((k) => document.getElementById("f-" + k).addEventListener("input", filt));
    filt();
  }

  return { live, runList, report, drawCharts, ema, CHARTS };
})();
