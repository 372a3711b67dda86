"""The only way out of a network grader's namespace: an HTTP(S) proxy that refuses the host itself.

    proxy = start_proxy(uid=61003)           # in the zygote, before it enters its own network namespace
    port = proxy.serve_inside()              # after: listens on 127.0.0.1:port in the new namespace
    # graders get HTTP_PROXY / HTTPS_PROXY = http://127.0.0.1:port (urllib, httpx, requests, litellm use them)

A grader declared with `network=True` runs in a network namespace of its own whose only interface is its
own loopback. The proxy process stays in the host's namespace and holds a listening socket made inside
the grader's: it relays `CONNECT host:port` (HTTPS) and absolute-URI HTTP requests to addresses that are
public, and answers 403 to loopback, private, link-local, multicast and reserved addresses and to any
address of the host itself (Ray's dashboard and other local services listen there). A name is resolved
once and the connection goes to the address that was checked. The proxy drops to the worker's slot uid
and `no_new_privs` once it holds its socket.
"""

from __future__ import annotations

import ipaddress
import select
import signal
import socket
import threading

from . import harden

HEAD_MAX = 64 << 10


def host_addresses() -> set[str]:
    """Every address of this host (in the namespace this runs in)."""
    out = {"0.0.0.0", "::"}
    try:
        with open("/proc/net/fib_trie") as f:
            lines = f.read().splitlines()
        for prev, line in zip(lines, lines[1:]):
            if "/32 host LOCAL" in line:
                out.add(prev.split()[-1])
    except OSError:
        pass
    try:
        with open("/proc/net/if_inet6") as f:
            for line in f:
                raw = line.split()[0]
                out.add(str(ipaddress.ip_address(bytes.fromhex(raw))))
    except (OSError, ValueError):
        pass
    return out


def allowed(address: str, own: set[str]) -> bool:
    """Whether a grader may connect to `address`: a public address that is not the host's own."""
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    if getattr(ip, "ipv4_mapped", None):
        ip = ip.ipv4_mapped
    return not (str(ip) in own or ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_multicast
                or ip.is_reserved or ip.is_unspecified)


def _resolve(host: str, port: int, own: set[str]) -> tuple | None:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None
    good = [i for i in infos if allowed(i[4][0], own)]
    if not good or len(good) != len(infos):  # a name with any forbidden address is refused whole
        return None
    return good[0]


def _relay(a: socket.socket, b: socket.socket) -> None:
    socks = [a, b]
    try:
        while True:
            ready, _, _ = select.select(socks, [], [], 300)
            if not ready:
                return
            for s in ready:
                data = s.recv(65536)
                if not data:
                    return
                (b if s is a else a).sendall(data)
    except OSError:
        return


def _handle(conn: socket.socket, own: set[str]) -> None:
    try:
        conn.settimeout(30)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(4096)
            if not chunk or len(head) > HEAD_MAX:
                return
            head += chunk
        first, _, rest = head.partition(b"\r\n")
        method, target, version = (first.decode("latin-1").split(" ") + ["", "", ""])[:3]
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            path = None
        elif target.startswith("http://"):
            hostport, slash, tail = target[7:].partition("/")
            host, _, port = hostport.rpartition(":") if ":" in hostport.rsplit("]", 1)[-1] else (hostport, "", "80")
            path = slash + tail or "/"
        else:
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            return
        host = host.strip("[]")
        target_info = _resolve(host, int(port), own) if port.isdigit() else None
        if target_info is None:
            conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\n\r\nagentrl sandbox: network graders may "
                         b"reach public addresses only, not this host or private networks\r\n")
            return
        family, kind, proto, _, addr = target_info
        out = socket.socket(family, kind, proto)
        out.settimeout(30)
        out.connect(addr)
        conn.settimeout(None)
        out.settimeout(None)
        if path is None:
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            leftover = head.split(b"\r\n\r\n", 1)[1]
        else:
            leftover = f"{method} {path} {version}".encode("latin-1") + b"\r\n" + rest
        if leftover:
            out.sendall(leftover)
        _relay(conn, out)
        out.close()
    except Exception:  # noqa: BLE001 - one bad request ends its own connection only
        pass
    finally:
        conn.close()


class Proxy:
    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid, self.sock = pid, sock

    def serve_inside(self) -> int:
        """Call in the grader's namespace: bring up its loopback, listen there, hand the socket over."""
        harden.loopback_up()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        socket.send_fds(self.sock, [b"L"], [listener.fileno()])
        port = listener.getsockname()[1]
        listener.close()
        self.sock.close()
        return port


def start_proxy(uid: int | None, close: tuple[int, ...] = ()) -> Proxy:
    """Fork the proxy process (in the current, host, network namespace)."""

    def serve(theirs: socket.socket) -> None:
        harden.prctl(harden.PR_SET_PDEATHSIG, signal.SIGKILL)
        own = host_addresses()
        import encodings.idna  # noqa: F401  (before the uid drop: the library may be unreadable after it)
        socket.getaddrinfo("localhost", 80)  # loads the resolver's modules now, for the same reason
        _, fds, _, _ = socket.recv_fds(theirs, 16, 1)
        theirs.close()
        listener = socket.socket(fileno=fds[0])
        harden.prctl(harden.PR_SET_NO_NEW_PRIVS, 1)
        if uid is not None:
            harden.drop_privileges(uid)
            harden.prctl(harden.PR_SET_PDEATHSIG, signal.SIGKILL)
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=_handle, args=(conn, own), daemon=True).start()

    return Proxy(*harden.fork_with_socket(serve, close))
