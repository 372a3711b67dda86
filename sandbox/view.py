"""What a call can see and write: the zygote's view of the file system and the Landlock rules built on it.

In its own mount namespace a zygote covers /tmp, /run, /var/tmp and /dev/shm (other programs' unix
sockets live there) and every directory others cannot enter (/root) with empty tmpfs, then bind-mounts
back only what the interpreter and agentrl need and what calls declare. Landlock then decides what may
be read: the interpreter's library, the sys.path entries (less any that holds the host's working
directory or home), agentrl's own folders, system libraries and declared paths; the only writable place
is the scratch dir: a size-capped tmpfs mounted afresh for every call (the one before is detached with
whatever it held: files, deep trees, extended attributes, modes), so no call starts from a state an
earlier call could have touched. /proc is a procfs of its own with `hidepid=invisible`: a call sees
its own uid's processes only, not the host's pids.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import sys
from typing import Callable

from . import harden

SHARED_DIRS = ("/tmp", "/var/tmp", "/run", "/dev/shm")
MS_NOEXEC = 8
SCRATCH_OPTS = "size=64m,nr_inodes=8192,mode=700"
RULESETS_MAX = 64


def within(path: str, folder: str) -> bool:
    """Whether absolute, normalised `path` is `folder` or lies below it."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def package_dirs() -> list[str]:
    """agentrl's own source folders. An editable install maps them from the checkout (agentrl/, sandbox/,
    presets/) without putting the checkout on sys.path, and a checkout under /tmp would otherwise vanish
    under the tmpfs that covers /tmp."""
    dirs = [os.path.dirname(os.path.abspath(__file__))]
    for name in ("agentrl", "agentrl.presets"):  # where they are, not their code: found, not imported
        spec = importlib.util.find_spec(name)
        dirs.extend(os.path.abspath(p) for p in (spec.submodule_search_locations or []) if spec is not None)
    return dirs


class FileView:
    """One zygote's view. `note(key, ok, reason)` adds a line to its isolation report."""

    def __init__(self, uid: int, network: bool, note: Callable[[str, bool, str], None]) -> None:
        self.uid, self.network, self.note = uid, network, note
        # Decided first, before /tmp is covered (the checkout or the virtualenv may live there), and read
        # by every call with or without a mount namespace: graders may import the agentrl.rewards helpers.
        self.package_dirs = package_dirs()
        self.library = self.library_paths(sys.path)
        self.abi = 0  # Landlock ABI, set by the zygote once it has measured it
        self.base_read: list[str] = []  # set by the zygote once its mounts are in place
        self.overlays: dict[str, int] = {}
        self.exposed: list[str] = []
        self.rulesets: dict[tuple, int] = {}
        # Exists only in the zygote's mount namespace (inside its own /tmp): a size-capped tmpfs.
        self.private = f"/tmp/agentrl-sandbox-{uid}"
        self.scratch = self.private + "/scratch"
        self.mounted = False  # whether the scratch dir is a tmpfs of its own, remounted per call
        self.noatime = False  # whether every mount in view is made to record no access times (set by the zygote)

    def library_paths(self, path_entries) -> list[str]:
        """The sys.path entries calls may read, less any that holds the host's working directory or home
        (AGENTRL_SANDBOX_PRIVATE): a project root that an editable install put on sys.path would
        otherwise expose the datasets and checkpoints kept beside the code."""
        private = [p for p in os.environ.get("AGENTRL_SANDBOX_PRIVATE", "").split(os.pathsep) if p]
        out, left_out = [], []
        for p in path_entries:
            if not p:
                continue
            p = os.path.realpath(p)
            (left_out if any(within(h, p) for h in private) else out).append(p)
        if left_out:
            self.note("sys_path_private", True, "not readable although on sys.path, as they hold the host's working "
                      "directory or home: " + ", ".join(left_out))
        return out

    # ------------------------------------------------------------ mounts
    def mount(self) -> None:
        """Inside the zygote's fresh mount namespace: hide what calls must not reach, mount the scratch tmpfs."""
        needed = sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, *self.library, *self.package_dirs)
                         if p and os.path.isdir(p)})
        harden.mount(None, "/", None, harden.MS_REC | harden.MS_PRIVATE)
        # Shared scratch and runtime dirs hold other programs' unix sockets (Ray's raylet under /tmp/ray,
        # dbus under /run), which Landlock ABI < 8 does not stop a connect() to: cover them with empty tmpfs.
        for d in SHARED_DIRS:
            if os.path.isdir(d) and not os.path.islink(d):
                self._overlay(d)
        self.note("shared_dirs_hidden", True, f"empty tmpfs over {', '.join(SHARED_DIRS)} (no foreign unix sockets)")
        os.makedirs(self.private, mode=0o711, exist_ok=True)
        harden.mount("tmpfs", self.private, "tmpfs", harden.MS_NOSUID | harden.MS_NODEV, "size=1m,mode=711")
        os.makedirs(self.scratch, mode=0o700, exist_ok=True)
        self.mounted = True
        try:  # calls see only their own uid's processes (no host pids, no template under another uid)
            harden.mount("proc", "/proc", "proc", harden.MS_NOSUID | harden.MS_NODEV | MS_NOEXEC, "hidepid=invisible")
            self.note("proc_hidden", True, "/proc: a procfs of its own with hidepid=invisible (own uid's processes only)")
        except OSError as e:
            self.note("proc_hidden", False, f"host /proc visible to stat(): {e}")
        # Paths the interpreter needs may sit below a directory the unprivileged uid cannot enter
        # (/root/.pyenv under /root 0700): cover that directory with a tmpfs holding only bind mounts.
        self.expose([p for p in needed if not any(p != q and within(p, q) for q in needed)])
        try:  # the host's device nodes: no call can set their times (which outlive every worker)
            harden.readonly_tree("/dev")
            self.note("dev_readonly", True, "/dev read-only: a call cannot set a device node's times")
        except OSError as e:
            self.note("dev_readonly", False, f"/dev writable: a call could set a device node's times ({e})")
        if self.noatime:  # on every mount, those made later included: a read leaves no access time behind
            harden.noatime_all("/")

    def expose(self, paths) -> None:
        """Make each path reachable for the per-slot uid at its own name, hiding its siblings: a directory
        that others cannot traverse is covered (once) by a tmpfs, and each exposed path is bind-mounted
        into it from the original directory. Landlock still decides what may be read."""
        for p in paths:
            if self._visible(p) or not p.startswith("/"):
                continue
            parts, anc = p.split("/"), None
            for i in range(2, len(parts)):
                cand = "/".join(parts[:i])
                if cand in self.overlays or not os.stat(cand).st_mode & stat.S_IXOTH:
                    anc = cand
                    break
            if anc is None:
                continue
            if anc not in self.overlays:
                self._overlay(anc)
            source = f"/proc/self/fd/{self.overlays[anc]}/{p[len(anc) + 1:]}"
            if not os.path.exists(source):
                continue
            if os.path.isdir(source):
                os.makedirs(p, mode=0o755, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(p), mode=0o755, exist_ok=True)
                open(p, "a").close()
            harden.mount(source, p, None, harden.MS_BIND | harden.MS_REC)
            self.exposed.append(p)
            self.note("hidden_dirs", True, "covered by tmpfs, only exposed paths visible: " + " ".join(self.exposed))
            if self.noatime and self.mounted:  # a declared path, exposed after set-up, and the tmpfs over it
                harden.noatime_all("/")

    def _overlay(self, d: str) -> None:
        """Cover `d` with an empty tmpfs, keeping an fd to the original to bind exposed paths from."""
        fd = os.open(d, os.O_PATH | os.O_CLOEXEC)
        harden.mount("tmpfs", d, "tmpfs", harden.MS_NOSUID | harden.MS_NODEV, "size=1m,mode=755")
        self.overlays[d] = fd

    @staticmethod
    def _visible(p: str) -> bool:
        if not os.path.exists(p):
            return False
        parts = p.split("/")
        return all(os.stat("/".join(parts[:i])).st_mode & stat.S_IXOTH for i in range(2, len(parts)))

    # ------------------------------------------------------------ Landlock
    def read_allowlist(self) -> list[str]:
        paths = {os.path.realpath(p) for p in (sys.base_prefix + "/lib", sys.prefix + "/lib", *self.library,
                                               *self.package_dirs) if p}
        paths |= {"/usr/lib", "/lib", "/lib64", "/usr/lib64", "/usr/local/lib", "/dev/null", "/dev/urandom",
                  "/dev/zero"}
        if self.network:  # name resolution and TLS roots
            paths |= {"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/gai.conf",
                      "/etc/ssl", "/etc/ca-certificates", "/usr/share/ca-certificates"}
        return sorted(p for p in paths if os.path.exists(p))

    def declared(self, read_paths) -> tuple[str, ...]:
        """The declared paths that the base allow-list does not already grant, in a canonical order: the
        template key. A path inside the interpreter's or agentrl's own folders needs no template of its
        own, so such calls share the template that started before any call's data was read."""
        if not read_paths:
            return ()
        return tuple(sorted({p for p in read_paths if not any(within(p, b) for b in self.base_read)}))

    def ruleset(self, read_paths: tuple[str, ...]) -> int | None:
        if self.abi < 1:
            return None
        if read_paths not in self.rulesets:
            if len(self.rulesets) >= RULESETS_MAX:
                for fd in self.rulesets.values():
                    os.close(fd)
                self.rulesets.clear()
            self.expose(read_paths)
            self.rulesets[read_paths] = harden.landlock_ruleset(
                self.base_read + list(read_paths), [self.write_root(), "/dev/null"], deny_tcp=not self.network,
                abi=self.abi)
        return self.rulesets[read_paths]

    # ------------------------------------------------------------ scratch
    def write_root(self) -> str:
        """Where Landlock grants writes: the folder above the per-call scratch mount (root's, mode 711, so
        the slot uid can write only inside the scratch mount), as a rule binds to an inode and every call
        gets a new one; without a mount namespace, the scratch dir itself."""
        return self.private if self.mounted else self.scratch

    def fresh_scratch(self) -> None:
        """A scratch dir no earlier call has touched: a new tmpfs over the old one, which is detached (it
        goes when the last process holding it does: every call's processes are dead by now). Raises
        OSError when that cannot be done: the zygote then retires itself."""
        if self.mounted:
            try:
                harden.umount(self.scratch)
            except OSError:
                pass  # nothing mounted yet
            opts = SCRATCH_OPTS + (f",uid={self.uid},gid={self.uid}" if os.geteuid() == 0 else "")
            harden.mount("tmpfs", self.scratch, "tmpfs", harden.MS_NOSUID | harden.MS_NODEV, opts)
            return
        # No mount namespace (the weak case): empty the directory; anything left makes the zygote retire.
        if not os.path.isdir(self.scratch):
            os.makedirs(self.scratch, 0o700, exist_ok=True)
        with os.scandir(self.scratch) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    try:
                        os.unlink(entry.path)
                    except OSError:
                        pass
        if os.listdir(self.scratch):
            raise OSError(f"scratch dir {self.scratch} could not be emptied")
        st = os.stat(self.scratch)
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(self.scratch, 0o700)
        if os.geteuid() == 0 and st.st_uid != self.uid:
            os.chown(self.scratch, self.uid, self.uid)
