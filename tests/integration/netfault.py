#!/usr/bin/env python3
"""A TCP proxy on loopback that a test controls, to make a network path fail
the way real ones do: `freeze()` stops carrying bytes in both directions
without closing anything (a pulled cable, a black-holing firewall, a hung
router), `thaw()` resumes, `reset()` closes every connection. Standard
library only; every thread is a daemon and every wait is bounded."""

import select
import socket
import threading

from harness import free_port


class Proxy:
    """Listens on 127.0.0.1:`port` and forwards each connection to
    127.0.0.1:`target_port`."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.port = free_port()
        self._frozen = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._pairs = []
        self.connections = 0  # accepted so far
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", self.port))
        self._listener.listen(128)
        self._listener.settimeout(0.1)
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def freeze(self):
        """From now on no byte moves either way; connections stay open, and
        new ones are accepted by the kernel but never forwarded."""
        self._frozen.set()

    def thaw(self):
        self._frozen.clear()

    def reset(self):
        """Closes every connection (both sides see the close)."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def stop(self):
        self._stop.set()
        self.reset()
        try:
            self._listener.close()
        except OSError:
            pass
        self._acceptor.join(5)

    def _accept(self):
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if self._frozen.is_set():
                # A frozen path delivers nothing: the connection is never
                # forwarded, but held open so that the peer sees no refusal.
                with self._lock:
                    self._pairs.append((client, client))
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
                self.connections += 1
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a, b):
        peers = {a: b, b: a}
        try:
            while not self._stop.is_set():
                if self._frozen.is_set():
                    # Not reading: bytes pile up in the kernel buffers and
                    # nothing reaches the other side.
                    self._stop.wait(0.05)
                    continue
                readable, _, _ = select.select([a, b], [], [], 0.1)
                for s in readable:
                    if self._frozen.is_set():
                        break
                    data = s.recv(65536)
                    if not data:
                        return
                    peers[s].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass
