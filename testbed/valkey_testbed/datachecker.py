"""The data checker: writes keys to a Valkey cluster and later proves none it was promised got lost.

"No acknowledged write lost" only means something if the acknowledgement is
real. A key counts as acknowledged only after `WAIT numreplicas timeout`,
issued on the very connection that wrote it, returned at least the expected
replica count: so the checker speaks RESP itself (`resp`), keeps exactly one
connection per primary (discovered with CLUSTER SLOTS from seed addresses),
routes keys by hash slot and follows MOVED/ASK itself rather than letting a
client library retry elsewhere behind its back. `verify()` then reads every
acknowledged key back from the primaries and reports any missing or changed.
The continuous writer measures the longest time without an acknowledged
write, overall and per slot range, which is what a failover or rollout costs.

Every connection goes to 127.0.0.0/8 (the test bed's network rule); any other
address raises NonLoopbackError before a socket is opened.

    async with DataChecker([("127.0.43.1", 7000)], replicas=1) as checker:
        await checker.write(2000)
        report = await checker.verify()
        assert report.ok, report
"""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import ssl as ssl_module
import time
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeAlias

import attrs

from valkey_testbed.resp import Arg, ProtocolError, Reply, ReplyError, encode_command, read_reply

SLOTS = 16384
Address: TypeAlias = tuple[str, int]

_LOOPBACK = ipaddress.IPv4Network("127.0.0.0/8")
_NETWORK_ERRORS = (OSError, EOFError, asyncio.IncompleteReadError, TimeoutError, ConnectionError)
REFRESH_STAGGER = 0.25
"""Seconds a slot-map refresh waits for a node that has not answered before it asks the next too."""


class NonLoopbackError(ValueError):
    """An address outside 127.0.0.0/8: the test bed never connects there."""


def check_loopback(host: str, networks: Sequence[ipaddress.IPv4Network] = (_LOOPBACK,)) -> None:
    """Refuse any address that is not an IP literal in networks (default 127.0.0.0/8; a real-nodes
    bed adds its bridge's pod range)."""
    allowed = ", ".join(map(str, networks))
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise NonLoopbackError(
            f"{host!r} is not an IP address; the data checker dials {allowed} only"
        ) from None
    if not any(address in network for network in networks):
        raise NonLoopbackError(f"{host} is outside {allowed}; the data checker dials there only")


# --- hash slots ----------------------------------------------------------------------------------


def _crc16_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        table.append(crc & 0xFFFF)
    return table


_CRC16 = _crc16_table()


def key_slot(key: bytes) -> int:
    """The cluster hash slot of key (CRC16/XMODEM of the key or its {hash tag})."""
    start = key.find(b"{")
    if start != -1:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1 : end]
    crc = 0
    for byte in key:
        crc = ((crc << 8) & 0xFFFF) ^ _CRC16[((crc >> 8) ^ byte) & 0xFF]
    return crc % SLOTS


# --- connections -------------------------------------------------------------------------------


class _Connection:
    """One RESP connection; a lock keeps a pipeline plus its WAIT together."""

    def __init__(self, address: Address, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.address = address
        self.reader = reader
        self.writer = writer
        self.lock = asyncio.Lock()
        self.broken = False

    async def execute(self, commands: Sequence[Sequence[Arg]], timeout: float) -> list[Reply]:
        """Send commands as one pipeline and read one reply each; any failure breaks the connection."""
        try:
            async with asyncio.timeout(timeout):
                self.writer.write(b"".join(encode_command(command) for command in commands))
                await self.writer.drain()
                return [await read_reply(self.reader) for _ in commands]
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.broken = True
        self.writer.close()


# --- results -------------------------------------------------------------------------------------


@attrs.frozen
class WriteReport:
    """What write(n) achieved: only `acknowledged` keys are promised to survive."""

    acknowledged: int
    unacknowledged: int  # written, but WAIT saw fewer replicas than expected
    failed: int  # never written (errors until the attempt or time bound)
    seconds: float
    errors: Mapping[str, int] = attrs.field(factory=dict)


@attrs.frozen
class VerifyReport:
    """Acknowledged keys found missing or changed, and those that could not be read."""

    checked: int
    missing: list[str]
    wrong: dict[str, tuple[bytes, bytes]]  # key -> (expected, actual)
    unreadable: dict[str, str]  # key -> last error

    @property
    def ok(self) -> bool:
        return not (self.missing or self.wrong or self.unreadable)

    def __str__(self) -> str:
        return (
            f"checked {self.checked} acknowledged keys: {len(self.missing)} missing {self.missing[:10]}, "
            f"{len(self.wrong)} wrong {list(self.wrong)[:10]}, {len(self.unreadable)} unreadable "
            f"{dict(list(self.unreadable.items())[:3])}"
        )


@attrs.frozen
class WriterReport:
    """The continuous writer's result: counts and the longest stretch with no acknowledged write."""

    attempted: int
    acknowledged: int
    unacknowledged: int
    failed: int
    seconds: float
    longest_gap: float  # seconds without any acknowledged write (start and end included)
    longest_gap_ended_at: float  # seconds after the start
    gaps_by_slots: dict[str, float]  # per initial shard ("0-5460"), its longest gap
    errors: Mapping[str, int] = attrs.field(factory=dict)


@attrs.define
class _Outcome:
    acked: list[bytes] = attrs.Factory(list)
    unacked: list[bytes] = attrs.Factory(list)
    retry: list[bytes] = attrs.Factory(list)
    asking: dict[bytes, Address] = attrs.Factory(dict)


class DataChecker:
    """Writes numbered keys through one connection per primary and remembers the acknowledged ones.

    replicas is the WAIT target: how many replicas each shard should have
    copied a write to before it counts (0 for a cluster without replicas).
    """

    def __init__(
        self,
        seeds: Iterable[Address],
        *,
        replicas: int = 1,
        wait_timeout_ms: int = 2000,
        username: str | None = None,
        password: str | None = None,
        ssl: ssl_module.SSLContext | None = None,
        server_hostname: str | None = None,
        prefix: str = "datachecker",
        value_size: int = 32,
        connect_timeout: float = 5.0,
        command_timeout: float = 5.0,
        networks: Sequence[ipaddress.IPv4Network] = (_LOOPBACK,),
    ) -> None:
        self.networks = tuple(networks)
        self.seeds = [(host, int(port)) for host, port in seeds]
        for host, _ in self.seeds:
            check_loopback(host, self.networks)
        self.replicas = replicas
        self.wait_timeout_ms = wait_timeout_ms
        self.username = username
        self.password = password
        self.ssl = ssl
        self.server_hostname = server_hostname
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout + wait_timeout_ms / 1000
        self.run_id = secrets.token_hex(4)
        self.prefix = f"{prefix}:{self.run_id}"
        self.value_size = value_size
        self.acknowledged: dict[bytes, bytes] = {}
        self._counter = 0
        self._slots: list[Address | None] = [None] * SLOTS
        self._replica_counts: dict[Address, int] = {}
        self._pool: dict[Address, _Connection] = {}
        self._refresh_lock = asyncio.Lock()
        self._stragglers: set[asyncio.Future[tuple[Address, list[Reply]]]] = set()
        self._stale = True
        self._errors: Counter[str] = Counter()

    async def __aenter__(self) -> DataChecker:
        await self.refresh()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every connection (after any refresh still asking a node)."""
        await asyncio.gather(*self._stragglers, return_exceptions=True)
        for connection in self._pool.values():
            connection.close()
        for connection in self._pool.values():
            await _wait_closed(connection)
        self._pool.clear()

    # --- topology ---

    @property
    def primaries(self) -> dict[Address, int]:
        """Primaries the checker currently routes to, with the replica count CLUSTER SLOTS showed."""
        return dict(self._replica_counts)

    def slot_ranges(self) -> dict[Address, list[tuple[int, int]]]:
        """Each primary's slot ranges as last seen."""
        ranges: dict[Address, list[tuple[int, int]]] = {}
        start = 0
        for slot in range(1, SLOTS + 1):
            if slot == SLOTS or self._slots[slot] != self._slots[start]:
                owner = self._slots[start]
                if owner is not None:
                    ranges.setdefault(owner, []).append((start, slot - 1))
                start = slot
        return ranges

    async def refresh(self) -> None:
        """Reload the slot map with CLUSTER SLOTS from any reachable known node or seed.

        Candidates are asked in order, the next one as soon as the last failed or REFRESH_STAGGER
        after it if it has not answered yet; the first answer wins. A node that accepts connections
        but answers nothing (a server stopping, a stalled process) must not hold a writer for the
        connect timeout, or the gap the writer reports would measure the checker, not the cluster.
        """
        async with self._refresh_lock:
            candidates = deque(dict.fromkeys([*self._pool, *self._replica_counts, *self.seeds]))
            errors: list[str] = []
            pending: set[asyncio.Task[tuple[Address, list[Reply]]]] = set()
            try:
                while candidates or pending:
                    if candidates:
                        pending.add(asyncio.create_task(self._slots_of(candidates.popleft(), errors)))
                    done, pending = await asyncio.wait(
                        pending,
                        timeout=REFRESH_STAGGER if candidates else None,
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    for task in done:
                        exc = task.exception()
                        if exc is None:
                            self._apply_slots(*task.result())
                            self._stale = False
                            return
                        if not isinstance(exc, _NETWORK_ERRORS):
                            raise exc
            finally:
                # Left to finish, not cancelled: cancelling would close a pooled connection a writer
                # still holds. close() waits for them.
                for task in pending:
                    self._stragglers.add(task)
                    task.add_done_callback(self._forget)
            raise ConnectionError("no node answered CLUSTER SLOTS: " + "; ".join(errors))

    async def _slots_of(self, address: Address, errors: list[str]) -> tuple[Address, list[Reply]]:
        """One refresh candidate's CLUSTER SLOTS; a failure is counted (it cost the writer time)."""
        try:
            return address, await self._cluster_slots(address)
        except _NETWORK_ERRORS as exc:
            errors.append(f"{address[0]}:{address[1]}: {exc!r}")
            self._errors[f"refresh candidate: {type(exc).__name__}"] += 1
            raise

    def _forget(self, task: asyncio.Future[tuple[Address, list[Reply]]]) -> None:
        """A late refresh answer: its result (or error, counted already) is not needed."""
        self._stragglers.discard(task)
        if not task.cancelled():
            task.exception()

    async def _cluster_slots(self, address: Address) -> list[Reply]:
        pooled = self._pool.get(address)
        if pooled is not None and not pooled.broken:
            async with pooled.lock:
                (reply,) = await pooled.execute([("CLUSTER", "SLOTS")], self.command_timeout)
        else:
            connection = await self._open(address)
            try:
                (reply,) = await connection.execute([("CLUSTER", "SLOTS")], self.command_timeout)
            finally:
                connection.close()
                await _wait_closed(connection)
        if isinstance(reply, ReplyError) or not isinstance(reply, list):
            raise _CommandError(f"CLUSTER SLOTS: {reply!r}")
        return reply

    def _apply_slots(self, asked: Address, reply: list[Reply]) -> None:
        slots: list[Address | None] = [None] * SLOTS
        replica_counts: dict[Address, int] = {}
        for entry in reply:
            if not isinstance(entry, list) or len(entry) < 3:
                continue
            start, end, node, *replicas = entry
            if not (isinstance(start, int) and isinstance(end, int) and isinstance(node, list)):
                continue
            address = _node_address(node, asked, self.networks)
            for slot in range(start, end + 1):
                slots[slot] = address
            replica_counts[address] = len(replicas)
        self._slots = slots
        self._replica_counts = replica_counts
        for address in [address for address in self._pool if address not in replica_counts]:
            self._pool.pop(address).close()

    # --- connections ---

    async def _open(self, address: Address) -> _Connection:
        host, port = address
        check_loopback(host, self.networks)
        async with asyncio.timeout(self.connect_timeout):
            reader, writer = await asyncio.open_connection(
                host,
                port,
                ssl=self.ssl,
                server_hostname=(self.server_hostname or host) if self.ssl else None,
            )
            connection = _Connection(address, reader, writer)
            if self.password is not None:
                auth: list[Arg] = ["AUTH", self.password]
                if self.username is not None:
                    auth.insert(1, self.username)
                (reply,) = await connection.execute([auth], self.command_timeout)
                if isinstance(reply, ReplyError):
                    connection.close()
                    raise _CommandError(f"AUTH to {host}:{port}: {reply.message}")
        return connection

    async def _connection(self, address: Address) -> _Connection:
        connection = self._pool.get(address)
        if connection is None or connection.broken:
            connection = await self._open(address)
            self._pool[address] = connection
        return connection

    def _owner(self, key: bytes) -> Address | None:
        return self._slots[key_slot(key)]

    async def _ensure_topology(self) -> None:
        if self._stale or not self._replica_counts:
            await self.refresh()

    # --- writing ---

    def _new_key(self) -> tuple[bytes, bytes]:
        self._counter += 1
        key = f"{self.prefix}:{self._counter}".encode()
        value = f"{self.run_id}:{self._counter}:".encode().ljust(self.value_size, b"x")
        return key, value

    async def _write_batch(
        self, address: Address, keys: Sequence[bytes], values: Mapping[bytes, bytes], asking: bool
    ) -> _Outcome:
        """SET keys on one primary's connection, then WAIT on that same connection."""
        outcome = _Outcome()
        commands: list[Sequence[Arg]] = []
        for key in keys:
            if asking:
                commands.append(("ASKING",))
            commands.append(("SET", key, values[key]))
        commands.append(("WAIT", self.replicas, self.wait_timeout_ms))
        connection = await self._connection(address)
        async with connection.lock:
            replies = await connection.execute(commands, self.command_timeout)
        set_replies = replies[1:-1:2] if asking else replies[:-1]
        written = []
        for key, reply in zip(keys, set_replies, strict=True):
            if reply == b"OK":
                written.append(key)
                continue
            outcome.retry.append(key)
            if isinstance(reply, ReplyError):
                self._errors[reply.kind] += 1
                self._follow_redirect(key, reply, outcome)
            else:
                self._errors[f"unexpected reply {reply!r}"[:60]] += 1
        waited = replies[-1]
        if isinstance(waited, int) and waited >= self.replicas:
            outcome.acked.extend(written)
        else:
            if isinstance(waited, ReplyError):
                self._errors[f"WAIT {waited.kind}"] += 1
            outcome.unacked.extend(written)
        return outcome

    def _follow_redirect(self, key: bytes, error: ReplyError, outcome: _Outcome) -> None:
        """MOVED updates the slot map (and asks for a full refresh); ASK redirects this key once."""
        words = error.message.split()
        if error.kind not in ("MOVED", "ASK") or len(words) != 3:
            if error.kind in ("CLUSTERDOWN", "READONLY", "NOAUTH", "TRYAGAIN"):
                self._stale = True
            return
        host, _, port = words[2].rpartition(":")
        if not host:  # the node does not know the target's endpoint: ask for the whole map
            self._stale = True
            return
        address = (host, int(port))
        check_loopback(host, self.networks)
        if error.kind == "MOVED":
            self._slots[int(words[1])] = address
            self._stale = True
        else:
            outcome.asking[key] = address

    async def _write_round(
        self,
        keys: Sequence[bytes],
        values: Mapping[bytes, bytes],
        asking: Mapping[bytes, Address],
        batch: int,
    ) -> _Outcome:
        """Write keys once, batched per owner, all primaries in parallel."""
        total = _Outcome()
        groups: dict[tuple[Address, bool], list[bytes]] = {}
        for key in keys:
            redirect = asking.get(key)
            owner = redirect or self._owner(key)
            if owner is None:
                total.retry.append(key)
                self._errors["no owner for slot"] += 1
                self._stale = True
                continue
            groups.setdefault((owner, redirect is not None), []).append(key)
        jobs = [
            (address, group[i : i + batch], ask)
            for (address, ask), group in groups.items()
            for i in range(0, len(group), batch)
        ]

        async def per_address(address: Address, chunks: list[tuple[list[bytes], bool]]) -> None:
            for chunk, ask in chunks:
                try:
                    outcome = await self._write_batch(address, chunk, values, ask)
                except _NETWORK_ERRORS as exc:
                    self._errors[type(exc).__name__] += 1
                    self._drop(address)
                    total.retry.extend(chunk)
                    continue
                total.acked += outcome.acked
                total.unacked += outcome.unacked
                total.retry += outcome.retry
                total.asking.update(outcome.asking)

        by_address: dict[Address, list[tuple[list[bytes], bool]]] = {}
        for address, chunk, ask in jobs:
            by_address.setdefault(address, []).append((chunk, ask))
        await asyncio.gather(*(per_address(address, chunks) for address, chunks in by_address.items()))
        return total

    def _drop(self, address: Address) -> None:
        connection = self._pool.pop(address, None)
        if connection is not None:
            connection.close()
        self._stale = True

    async def write(
        self, n: int, *, batch: int = 100, attempts: int = 5, timeout: float = 60.0
    ) -> WriteReport:
        """Write n new keys; retry redirects, errors and short WAITs up to attempts rounds and timeout."""
        self._errors = Counter()
        started = time.monotonic()
        values = dict(self._new_key() for _ in range(n))
        pending = list(values)
        asking: dict[bytes, Address] = {}
        unacked: set[bytes] = set()
        for attempt in range(attempts):
            if not pending or time.monotonic() - started > timeout:
                break
            if attempt:
                await asyncio.sleep(min(0.1 * 2**attempt, 2.0))
            try:
                await self._ensure_topology()
            except ConnectionError as exc:
                self._errors[f"refresh: {type(exc).__name__}"] += 1
                continue
            try:
                async with asyncio.timeout(max(timeout - (time.monotonic() - started), 0.1)):
                    outcome = await self._write_round(pending, values, asking, batch)
            except TimeoutError:
                self._errors["write timeout"] += 1
                break
            for key in outcome.acked:
                self.acknowledged[key] = values[key]
                unacked.discard(key)
            unacked.update(outcome.unacked)
            asking = outcome.asking
            pending = outcome.retry + outcome.unacked
        failed = len([key for key in pending if key not in unacked])
        return WriteReport(
            acknowledged=len([key for key in values if key in self.acknowledged]),
            unacknowledged=len(unacked),
            failed=failed,
            seconds=time.monotonic() - started,
            errors=dict(self._errors),
        )

    async def run_writer(
        self,
        *,
        max_keys: int,
        duration: float,
        interval: float = 0.0,
        stop: asyncio.Event | None = None,
    ) -> WriterReport:
        """Write one key at a time until max_keys, duration or stop; measure gaps between acks.

        A key is tried once more after a MOVED/ASK redirect; any other failure
        moves on to the next key (after a short pause and a topology refresh),
        so the gap reflects how long the cluster could not take writes.
        """
        self._errors = Counter()
        await self._ensure_topology()
        labels = self._slot_labels()
        started = time.monotonic()
        last_ok = started
        last_ok_by_label = dict.fromkeys(set(labels), started)
        gaps_by_label = dict.fromkeys(set(labels), 0.0)
        longest, longest_end = 0.0, 0.0
        attempted = acked = unacked = failed = 0
        while attempted < max_keys and time.monotonic() - started < duration:
            if stop is not None and stop.is_set():
                break
            key, value = self._new_key()
            attempted += 1
            status = await self._write_one(key, value)
            now = time.monotonic()
            if status == "acked":
                acked += 1
                self.acknowledged[key] = value
                if now - last_ok > longest:
                    longest, longest_end = now - last_ok, now - started
                last_ok = now
                label = labels[key_slot(key)]
                gaps_by_label[label] = max(gaps_by_label[label], now - last_ok_by_label[label])
                last_ok_by_label[label] = now
            elif status == "unacked":
                unacked += 1
            else:
                failed += 1
                await asyncio.sleep(0.05)
            if interval:
                await asyncio.sleep(interval)
        ended = time.monotonic()
        if ended - last_ok > longest:
            longest, longest_end = ended - last_ok, ended - started
        for label, when in last_ok_by_label.items():
            gaps_by_label[label] = max(gaps_by_label[label], ended - when)
        return WriterReport(
            attempted=attempted,
            acknowledged=acked,
            unacknowledged=unacked,
            failed=failed,
            seconds=ended - started,
            longest_gap=longest,
            longest_gap_ended_at=longest_end,
            gaps_by_slots=gaps_by_label,
            errors=dict(self._errors),
        )

    async def _write_one(self, key: bytes, value: bytes) -> str:
        asking: dict[bytes, Address] = {}
        for _ in range(3):
            try:
                await self._ensure_topology()
                outcome = await self._write_round([key], {key: value}, asking, 1)
            except ConnectionError as exc:
                self._errors[type(exc).__name__] += 1
                return "failed"
            if outcome.acked:
                return "acked"
            if outcome.unacked:
                return "unacked"
            redirected = outcome.asking or self._stale
            if not redirected:
                return "failed"
            asking = outcome.asking
        return "failed"

    def _slot_labels(self) -> list[str]:
        """Each slot's initial shard, named by its slot ranges ("0-5460")."""
        labels = ["unassigned"] * SLOTS
        for ranges in self.slot_ranges().values():
            label = ",".join(f"{start}-{end}" for start, end in ranges)
            for start, end in ranges:
                labels[start : end + 1] = [label] * (end - start + 1)
        return labels

    # --- verifying ---

    async def verify(self, *, batch: int = 500, attempts: int = 5) -> VerifyReport:
        """Read every acknowledged key from its primary; report missing, wrong and unreadable keys."""
        expected = dict(self.acknowledged)
        pending = list(expected)
        missing: list[str] = []
        wrong: dict[str, tuple[bytes, bytes]] = {}
        last_error: dict[bytes, str] = {}
        asking: dict[bytes, Address] = {}
        for attempt in range(attempts):
            if not pending:
                break
            if attempt:
                await asyncio.sleep(min(0.1 * 2**attempt, 2.0))
            try:
                await self._ensure_topology()
            except ConnectionError as exc:
                for key in pending:
                    last_error[key] = repr(exc)
                continue
            values, retry, asking = await self._read_round(pending, asking, batch, last_error)
            for key, value in values.items():
                if value is None:
                    missing.append(key.decode())
                elif value != expected[key]:
                    wrong[key.decode()] = (expected[key], value)
                last_error.pop(key, None)
            pending = retry
        unreadable = {key.decode(): last_error.get(key, "not read") for key in pending}
        return VerifyReport(len(expected), sorted(missing), wrong, unreadable)

    async def _read_round(
        self,
        keys: Sequence[bytes],
        asking: Mapping[bytes, Address],
        batch: int,
        last_error: dict[bytes, str],
    ) -> tuple[dict[bytes, bytes | None], list[bytes], dict[bytes, Address]]:
        values: dict[bytes, bytes | None] = {}
        retry: list[bytes] = []
        next_asking: dict[bytes, Address] = {}
        groups: dict[tuple[Address, bool], list[bytes]] = {}
        for key in keys:
            redirect = asking.get(key)
            owner = redirect or self._owner(key)
            if owner is None:
                retry.append(key)
                last_error[key] = "no owner for slot"
                self._stale = True
                continue
            groups.setdefault((owner, redirect is not None), []).append(key)

        async def read(address: Address, chunk: list[bytes], ask: bool) -> None:
            commands: list[Sequence[Arg]] = []
            for key in chunk:
                if ask:
                    commands.append(("ASKING",))
                commands.append(("GET", key))
            try:
                connection = await self._connection(address)
                async with connection.lock:
                    replies = await connection.execute(commands, self.command_timeout)
            except _NETWORK_ERRORS as exc:
                self._drop(address)
                retry.extend(chunk)
                for key in chunk:
                    last_error[key] = f"{address[0]}:{address[1]}: {exc!r}"
                return
            for key, reply in zip(chunk, replies[1::2] if ask else replies, strict=True):
                if isinstance(reply, ReplyError):
                    retry.append(key)
                    last_error[key] = reply.message
                    outcome = _Outcome()
                    self._follow_redirect(key, reply, outcome)
                    next_asking.update(outcome.asking)
                elif reply is None or isinstance(reply, bytes):
                    values[key] = reply
                else:
                    retry.append(key)
                    last_error[key] = f"unexpected reply {reply!r}"

        async def per_address(address: Address, ask: bool, group: list[bytes]) -> None:
            for i in range(0, len(group), batch):
                await read(address, group[i : i + batch], ask)

        await asyncio.gather(*(per_address(address, ask, group) for (address, ask), group in groups.items()))
        return values, retry, next_asking


class _CommandError(ConnectionError):
    """A command the checker needs (AUTH, CLUSTER SLOTS) failed on an otherwise working connection."""


def _node_address(node: list[Reply], asked: Address, networks: Sequence[ipaddress.IPv4Network]) -> Address:
    host = node[0]
    port = node[1]
    if not isinstance(port, int):
        raise ProtocolError(f"CLUSTER SLOTS node without a port: {node!r}")
    name = host.decode() if isinstance(host, bytes) else ""
    if name in ("", "?"):
        name = asked[0]  # the node we asked does not know its own endpoint: it is that one
    check_loopback(name, networks)
    return name, port


async def _wait_closed(connection: _Connection) -> None:
    try:
        async with asyncio.timeout(1.0):
            await connection.writer.wait_closed()
    except (*_NETWORK_ERRORS, ssl_module.SSLError):
        pass
