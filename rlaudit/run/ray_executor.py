"""The Ray executor: one Ray task per batch of runs on an existing cluster; the driver keeps the single-writer store.

A batch is one run, or the seeds of one JAX program (:func:`rlaudit.run.backends.make_batches`). Each batch is a
Ray task reserving ``cpus_per_run`` CPUs and ``gpus_per_run`` GPUs. Evaluation records stream
back while the run trains: every task attempt sends its events (``start``, ``record``, ``progress``) to a
small *inbox* actor pinned to the driver's node, and the driver drains the inbox a few times a second and
hands the events to its :class:`~rlaudit.run.executors.EventSink` (the store, the progress bar).

Fault tolerance. Each attempt of a task draws a random attempt id and announces it first. A task whose
worker process or node dies is retried by Ray (``max_retries`` times); when the driver sees a second
attempt id for a run it calls ``sink.restarted`` (the store discards the partial evaluations) and from then
on accepts events of the new attempt only, so late events of the dead attempt are dropped, never
duplicated. A task that *raises* is not retried (``retry_exceptions=False``): the run is recorded failed
with the remote traceback and the sweep goes on.

Before anything is submitted the executor checks that the address answers, that some node has the
resources asked per run, and, with one probe task per node, that rlaudit (same version) and every
algorithm of the sweep, plugins included, import on the workers (:meth:`RayExecutor.check`, which a driver
may also call before it opens the store).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from rlaudit.errors import InputError
from rlaudit.io import loads_nested
from rlaudit.run.executors import EventSink, check_run_timeout
from rlaudit.run.spec import RunSpec, batch_timeout, timed_out_error

RUNTIME_ENV_VAR = "RLAUDIT_RAY_RUNTIME_ENV"
"""Environment variable read when no ``runtime_env`` is given: JSON text, or a ``.json``/``.yaml`` file."""

CONNECT_TIMEOUT_S = 3.0
"""Seconds to wait for the cluster address to answer before giving up with a clear error."""

PROBE_TIMEOUT_S = 300.0
"""Seconds for the per-node import probe (a ``runtime_env`` with ``pip`` may take minutes to build)."""

POLL_INTERVAL_S = 0.25
"""How often the driver drains the inbox and checks for finished tasks."""

TASK_PREFIX = "rlaudit:"
"""Ray task names are ``rlaudit:<run_id>``; workers show them as their process title ``ray::rlaudit:…``."""

_INSTALL_HINT = "--executor ray needs Ray: pip install 'rlaudit[ray]'"


def _import_ray():
    try:
        import ray
    except ImportError:
        raise InputError(_INSTALL_HINT) from None
    return ray


def parse_address(address: str | None) -> tuple[str, int] | None:
    """Split ``"HOST:PORT"`` into ``(host, port)``; ``None`` for ``None`` and ``"auto"``.

    Raises:
        InputError: anything else (a ``ray://`` client address included).
    """
    if address is None or address == "auto":
        return None
    if address.startswith("ray://"):
        raise InputError(f"--address {address}: Ray Client addresses are not supported; run rlaudit on a node "
                         f"of the cluster (or through 'ray job submit') with --address auto or HOST:PORT")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--address {address!r}: expected HOST:PORT of the Ray head (e.g. 10.0.0.1:6379) or 'auto'")
    return host.strip("[]"), int(port)


def load_runtime_env(value: dict | str | None) -> dict | None:
    """Read a Ray ``runtime_env``: a dict, JSON text, or the path of a ``.json``/``.yaml`` file.

    With ``value=None`` the :data:`RUNTIME_ENV_VAR` environment variable is read, if set.

    Raises:
        InputError: unreadable file or text that is not a JSON/YAML mapping, naming where it came from.
    """
    where = "runtime_env"
    if value is None:
        value = os.environ.get(RUNTIME_ENV_VAR) or None
        where = RUNTIME_ENV_VAR
    if value is None:
        return value
    if isinstance(value, dict):
        return _mapping(value, where, "a mapping")
    text = value.strip()
    if not text.startswith("{"):
        path = Path(text)
        where = f"{where} file {path}"
        try:
            text = path.read_text(encoding="utf-8-sig")
        except OSError as exc:
            raise InputError(f"{where}: cannot read ({exc.strerror})") from None
        if path.suffix.lower() in (".yaml", ".yml"):
            try:
                import yaml
            except ImportError:
                raise InputError(f"{where}: reading YAML needs PyYAML (or give JSON)") from None
            try:
                env = loads_nested(yaml.safe_load, text, where)
            except yaml.YAMLError as exc:
                raise InputError(f"{where}: not valid YAML ({exc})") from None
            return _mapping(env, where, "a mapping such as {working_dir: ...}")
    try:
        env = loads_nested(json.loads, text, where)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})") from None
    return _mapping(env, where, 'a JSON object such as {"working_dir": "..."}')


def _mapping(env, where: str, expected: str) -> dict:
    """``env`` when it is a mapping (what Ray's ``runtime_env`` is) whose fields Ray accepts, else one line
    naming ``where``. Ray's own checks run here, before anything connects, so that a wrongly typed field
    (``{"working_dir": 5}``, ``env_vars`` values that are not strings) is not a traceback out of ``ray.init``."""
    if not isinstance(env, dict):
        raise InputError(f"{where}: expected {expected}")
    try:
        from ray.runtime_env import RuntimeEnv
    except ImportError:
        return env  # reported when the executor needs Ray (_INSTALL_HINT)
    try:
        RuntimeEnv(**env)
    except TypeError as exc:
        raise InputError(f"{where}: {_first_line(exc)}") from None
    except ValueError:
        pass  # a value Ray checks against this machine (a working_dir that is not here): ray.init names it
    return env


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Fail fast unless ``address`` accepts TCP connections and speaks HTTP/2 (gRPC) like a Ray GCS.

    ``ray.init`` itself retries an unreachable or non-Ray address for minutes; this check answers in
    ``timeout`` seconds at most.

    Raises:
        InputError: naming the address and what went wrong.
    """
    host, port = parse_address(address)
    hint = "is 'ray start --head' running there, and is the port the head's --port (default 6379)?"
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except socket.timeout:
        raise InputError(f"--address {address}: no answer within {timeout:.0f} s; {hint}") from None
    except OSError as exc:
        raise InputError(f"--address {address}: cannot connect ({exc.strerror or exc}); {hint}") from None
    try:
        sock.settimeout(timeout)
        # A gRPC server answers the HTTP/2 client preface with a SETTINGS frame (type 0x4).
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        head = b""
        while len(head) < 4:
            chunk = sock.recv(9 - len(head))
            if not chunk:
                break
            head += chunk
    except OSError:
        head = b""
    finally:
        sock.close()
    if len(head) < 4 or head[3] != 0x04:
        raise InputError(f"--address {address}: something answers there but it is not a Ray cluster (no gRPC); "
                         f"{hint}")


AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def private_instance_token() -> dict[str, str | None] | None:
    """Give a private Ray instance (no ``--address``) a token held in the environment only.

    Ray enables token authentication for every new local instance and, when no token exists, writes a new
    one to ``~/.ray/auth_token``; each later ``ray start --head`` finds that file and turns authentication
    on, and drivers connecting to such a cluster by address are refused (``InvalidAuthToken``). A token in
    ``RAY_AUTH_TOKEN`` (inherited by the instance's processes) keeps authentication on and leaves no file.

    Returns:
        The variables to put back with :func:`restore_auth_env` after ``ray.shutdown()``; ``None`` (nothing
        changed) when the user has set authentication up: any of :data:`AUTH_VARIABLES`, or a token file.
    """
    if any(os.environ.get(k) for k in AUTH_VARIABLES) or (Path.home() / ".ray" / "auth_token").exists():
        return None
    saved = {k: os.environ.get(k) for k in AUTH_VARIABLES}
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    return saved


def restore_auth_env(saved: dict[str, str | None] | None) -> None:
    """Undo :func:`private_instance_token` (Ray also sets ``RAY_AUTH_MODE``), so that a later connection in
    this process sees the user's own settings."""
    if saved is None:
        return
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:  # Ray caches the mode and the token; refresh both as Ray's own test helpers do
        from ray._raylet import AuthenticationTokenLoader, Config

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()
    except (ImportError, AttributeError):
        pass


def auth_refusal(exc: BaseException, address: str | None) -> InputError | None:
    """The one-line error for a cluster that refused this driver's authentication token; ``None`` otherwise.

    Ray's own message does not say why a cluster wants a token: ``ray start --head`` turns token
    authentication on whenever ``~/.ray/auth_token`` exists on its machine, which any earlier local Ray
    instance (an older rlaudit's private one, a notebook's ``ray.init()``) may have written.
    """
    text = f"{type(exc).__name__}: {exc}"
    if not any(k in text for k in ("AuthenticationError", "InvalidAuthToken", "authentication token")):
        return None
    why = (getattr(exc, "message", None) or _first_line(exc)).strip().rstrip(".")
    return InputError(f"--address {address or '(private instance)'}: the cluster refused this driver's "
                      f"authentication token ({why}); 'ray start --head' requires a token whenever "
                      f"~/.ray/auth_token exists on the head's machine (written by any earlier local Ray): give "
                      f"the driver that token (RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH), or restart the cluster "
                      f"with RAY_AUTH_MODE=disabled")


# ------------------------------------------------------------------------------------------- remote side
def _worker_label() -> tuple[str, str]:
    """``(node, worker)`` labels of the current Ray worker: node ``ip/node-id[:8]``, worker adds the pid."""
    import ray

    ctx = ray.get_runtime_context()
    node = f"{ray.util.get_node_ip_address()}/{ctx.get_node_id()[:8]}"
    return node, f"{node} pid {os.getpid()}"


def _train(batch: tuple[RunSpec, ...], inbox) -> tuple[str, list]:
    """Body of a batch's Ray task (one run, or the vmapped seeds of a JAX batch): announce the attempt, train,
    stream events to ``inbox``; the outcomes, one per run (:data:`rlaudit.run.backends.Outcome`)."""
    import ray

    from rlaudit.run.backends import execute_batch
    from rlaudit.run.executors import prepare_training_process

    prepare_training_process()  # results must not depend on the number of CPUs reserved
    attempt = uuid.uuid4().hex
    node, worker = _worker_label()
    # Synchronous puts for start and records: a record is in the inbox before the next event, and all are
    # there before the task's result is (actor calls from one caller execute in order).
    for spec in batch:
        ray.get(inbox.put.remote(("start", spec.run_id, attempt, worker, node)))

    def emit(rec) -> None:
        ray.get(inbox.put.remote(("record", rec.run_id, attempt, rec)))

    def progress(steps: int) -> None:
        for spec in batch:
            inbox.put.remote(("progress", spec.run_id, attempt, steps))

    return attempt, execute_batch(batch, emit, progress=progress)


def _probe(algorithms: Sequence[str], backends: Sequence[str] = ()) -> dict:
    """Run on each node before the sweep: rlaudit's version and whether each algorithm and training backend
    imports there."""
    import rlaudit
    from rlaudit.algorithms import get_spec, list_specs
    from rlaudit.run.backends import get_backend

    registered = {s.name for s in list_specs()}
    problems = {}
    for name in algorithms:
        try:
            get_spec(name).load()
        except Exception as exc:  # noqa: BLE001 - reported to the user, naming the algorithm
            if name not in registered:
                problems[name] = "no package installed there registers it"
            else:
                problems[name] = f"{type(exc).__name__}: {exc}"
    for name in backends:
        missing = get_backend(name).missing_dependency()
        if missing:
            problems[f"backend {name}"] = missing
    node, _ = _worker_label()
    return {"node": node, "version": rlaudit.__version__, "problems": problems}


class _Inbox:
    """Actor collecting the events of every task attempt until the driver drains them."""

    def __init__(self):
        self.items: list = []

    def put(self, item) -> None:
        self.items.append(item)

    def drain(self) -> list:
        items, self.items = self.items, []
        return items


# ------------------------------------------------------------------------------------------- driver side
class _EventRouter:
    """Passes the events of each run's live attempt to the sink; drops late events of lost attempts.

    Args:
        sink: the driver's event sink.
        count: ``count(node, what)`` for the per-node summary (``what`` is ``"lost"`` here).
    """

    def __init__(self, sink: EventSink, count):
        self.sink = sink
        self.count = count
        self.live: dict[str, tuple[str, str, str]] = {}  # run_id -> (attempt id, worker, node)
        self.started_at: dict[str, float] = {}  # run_id -> monotonic time its latest attempt started
        progress = getattr(sink, "progress", None)
        self.progress = progress if callable(progress) else None

    def dispatch(self, events: list) -> None:
        """Handle ``(kind, run_id, attempt, *payload)`` events in the order the workers sent them."""
        for kind, run_id, attempt, *rest in events:
            if kind == "start":
                worker, node = rest
                old = self.live.get(run_id)
                if old is not None and old[0] != attempt:
                    self.count(old[2], "lost")
                    self.sink.restarted(run_id, f"worker {old[1]} was lost; Ray retried the run on {worker}")
                self.live[run_id] = (attempt, worker, node)
                self.started_at[run_id] = time.monotonic()
                self.sink.started(run_id, worker)
            elif not self.is_live(run_id, attempt):
                continue  # a late event of a lost attempt
            elif kind == "record":
                self.sink.record(rest[0])
            elif kind == "progress" and self.progress is not None:
                self.progress(run_id, rest[0])

    def is_live(self, run_id: str, attempt: str) -> bool:
        """Whether ``attempt`` is the latest attempt of ``run_id`` seen."""
        return run_id in self.live and self.live[run_id][0] == attempt

    def overdue(self, limits: dict[str, float]) -> list[str]:
        """Runs of ``limits`` (run id -> seconds) whose latest attempt started more than their limit ago."""
        now = time.monotonic()
        return [r for r, limit in limits.items() if r in self.started_at and now - self.started_at[r] > limit]

    def stop(self, run_id: str) -> None:
        """Forget ``run_id``'s attempt: its late events are dropped (:meth:`is_live` is false from now on)."""
        self.live.pop(run_id, None)
        self.started_at.pop(run_id, None)

    def node_of(self, run_id: str) -> str:
        """Node label of the run's latest attempt (``"unknown node"`` before it started)."""
        return self.live[run_id][2] if run_id in self.live else "unknown node"


class RayExecutor:
    """Runs each spec as a Ray task on a cluster, streaming records back to the driver.

    Args:
        address: ``"HOST:PORT"`` of the Ray head's GCS, ``"auto"`` (the cluster started on this machine, or
            ``RAY_ADDRESS``), or ``None``: ``RAY_ADDRESS`` if set, else a private Ray instance on this machine.
        cpus_per_run: CPUs Ray reserves for each run (torch still uses one thread, so results match the
            local executor; reserve more for heavy environments or to leave cores idle).
        gpus_per_run: GPUs reserved for each run (fractions allowed, e.g. 0.25 shares a GPU by four).
        max_retries: times a run is retried when its worker process or node is lost. A run that raises is
            never retried.
        runtime_env: Ray runtime environment for the workers (dict, JSON text or ``.json``/``.yaml`` path),
            e.g. ``{"working_dir": "plugins/"}``; default: the ``RLAUDIT_RAY_RUNTIME_ENV`` variable.
        run_timeout: wall-time limit of one run in seconds from its worker's start of it (``None``: none); a run
            past it has its task cancelled (the worker process is killed) and is recorded timed out. A batch of n
            runs trained together in one task (a JAX batch's seeds) gets n times it
            (:func:`~rlaudit.run.spec.batch_timeout`).
    """

    name = "ray"

    def __init__(self, address: str | None = None, cpus_per_run: float = 1, gpus_per_run: float = 0,
                 max_retries: int = 2, runtime_env: dict | str | None = None, run_timeout: float | None = None):
        if address is None:
            address = os.environ.get("RAY_ADDRESS") or None
        parse_address(address)
        if not cpus_per_run > 0:
            raise InputError(f"--cpus-per-run: must be positive, got {cpus_per_run}")
        if gpus_per_run < 0:
            raise InputError(f"--gpus-per-run: must be 0 or more, got {gpus_per_run}")
        if gpus_per_run > 1 and gpus_per_run != int(gpus_per_run):
            raise InputError(f"--gpus-per-run: above 1 it must be a whole number, got {gpus_per_run}")
        if max_retries < 0:
            raise InputError(f"--max-retries: must be 0 or more, got {max_retries}")
        self.address = address
        self.cpus_per_run = cpus_per_run
        self.gpus_per_run = gpus_per_run
        self.max_retries = max_retries
        self.run_timeout = check_run_timeout(run_timeout)
        self.runtime_env = load_runtime_env(runtime_env)
        _import_ray()  # before the driver writes anything: a missing extra is bad input, not a failed sweep
        self._owns_ray = False  # whether this executor's ray.init made the connection (and shuts it down)
        self._auth_env: dict[str, str | None] | None = None  # restored after a private instance shuts down
        self._temp_dir: str | None = None  # a private instance's session files, removed after it shuts down
        self._checked: set[str] | None = None  # algorithms checked on the connected cluster
        self.node_counts: dict[str, Counter] = {}
        """Per node label: ``done``, ``failed`` and ``lost`` (attempts whose worker died) of the last sweep."""

    # ------------------------------------------------------------------------------------------ connect
    def _connect(self, ray) -> bool:
        """Connect to the cluster; return whether this call initialised Ray (and must shut it down)."""
        if ray.is_initialized():
            return False
        address = self.address
        if address == "auto":
            try:
                from ray._private.services import canonicalize_bootstrap_address

                address = canonicalize_bootstrap_address("auto")
            except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError or others
                raise InputError(f"--address auto: no Ray cluster found on this machine ({exc}); start one with "
                                 f"'ray start --head' or give --address HOST:PORT") from None
            if not address:
                raise InputError("--address auto: no Ray cluster found on this machine; start one with "
                                 "'ray start --head' or give --address HOST:PORT")
        if address is not None:
            check_reachable(address)
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        private = {}
        if address is None:  # a private instance: its token and its session files go when it does
            self._auth_env = private_instance_token()
            self._temp_dir = tempfile.mkdtemp(prefix="rlaudit-ray-", dir="/tmp" if os.path.isdir("/tmp") else None)
            private = {"_temp_dir": self._temp_dir}  # under /tmp: Ray's socket paths must stay short
        # ray.init replaces the SIGTERM handler with sys.exit; keep the driver's (SIGTERM stops like Ctrl-C).
        main = threading.current_thread() is threading.main_thread()
        sigterm = signal.getsignal(signal.SIGTERM) if main else None
        try:
            ray.init(address=address, runtime_env=self.runtime_env, log_to_driver=False,
                     logging_level="ERROR", configure_logging=True, **private)
        except Exception as exc:  # noqa: BLE001 - each kind gets its own line below
            refused = auth_refusal(exc, address)
            if refused is not None:
                raise refused from None
            if isinstance(exc, ConnectionError):
                raise InputError(f"--address {address}: {exc}") from None
            if isinstance(exc, (TypeError, ValueError)):  # a malformed runtime_env
                raise InputError(f"runtime_env: {exc}") from None
            raise
        finally:
            if main and sigterm is not None:
                signal.signal(signal.SIGTERM, sigterm)
            if not ray.is_initialized():
                self._shutdown(ray, started=False)
        return True

    def _shutdown(self, ray, started: bool = True) -> None:
        """Shut down the instance this executor's ``ray.init`` started or joined; a private instance's token and
        session files go with it."""
        if started:
            ray.shutdown()
        self._owns_ray = False
        restore_auth_env(self._auth_env)
        self._auth_env = None
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    def _check_cluster(self, ray, specs: Sequence[RunSpec]) -> list[str]:
        """Check resources and imports on every node able to take a run; return those nodes' ids.

        Raises:
            InputError: no node fits one run, or rlaudit / an algorithm does not import on some node.
        """
        import rlaudit
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [n for n in ray.nodes() if n.get("Alive")]
        fits = [n for n in nodes if n["Resources"].get("CPU", 0) >= self.cpus_per_run
                and n["Resources"].get("GPU", 0) >= self.gpus_per_run]
        if not fits:
            largest = max(nodes, key=lambda n: (n["Resources"].get("GPU", 0), n["Resources"].get("CPU", 0)),
                          default=None)
            have = (f"its largest node has {_count_of(largest, 'CPU')} and {_count_of(largest, 'GPU')}"
                    if largest else "it has no live node")
            raise InputError(f"--cpus-per-run {self.cpus_per_run:g} --gpus-per-run {self.gpus_per_run:g}: no node of "
                             f"the Ray cluster can hold one run ({have}); lower them or add nodes")
        names = sorted({s.algorithm.name for s in specs})
        backends = sorted({s.algorithm.backend for s in specs})
        probe = ray.remote(_probe)
        refs = {probe.options(num_cpus=0, max_retries=0, name="rlaudit:probe",
                              scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
                              ).remote(names, backends): n for n in fits}
        ready, not_ready = ray.wait(list(refs), num_returns=len(refs), timeout=PROBE_TIMEOUT_S)
        if not_ready:
            node = refs[not_ready[0]]
            raise InputError(f"Ray node {node['NodeManagerAddress']} did not start a worker within "
                             f"{PROBE_TIMEOUT_S:.0f} s (a runtime_env still building, or no free worker?)")
        for ref in ready:
            node = refs[ref]
            where = f"Ray node {node['NodeManagerAddress']} ({node['NodeID'][:8]})"
            try:
                info = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - e.g. rlaudit not importable there, runtime_env failed
                last = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
                raise InputError(f"{where}: cannot run rlaudit there ({last}); install rlaudit (same version "
                                 f"as here, {rlaudit.__version__}) on every node, or ship it with a runtime_env "
                                 f"(docs/ray.md)") from None
            if info["version"] != rlaudit.__version__:
                raise InputError(f"{where}: rlaudit {info['version']} there but {rlaudit.__version__} here; "
                                 f"install the same version on every node")
            for algo, problem in sorted(info["problems"].items()):
                if algo.startswith("backend "):
                    raise InputError(f"{where}: the {algo} cannot run on the workers ({problem})")
                raise InputError(f"{where}: algorithm {algo!r} is not importable on the workers ({problem}); "
                                 f"install its package on every node or ship it with a runtime_env "
                                 f"working_dir (docs/ray.md)")
        return [n["NodeID"] for n in fits]

    # ------------------------------------------------------------------------------------------ run
    def check(self, specs: Sequence[RunSpec]) -> None:
        """Connect and check the cluster for ``specs`` without submitting any run.

        The driver may call this before it opens the store, so that a cluster problem leaves nothing behind;
        :meth:`run` calls it itself when it has not been called. It keeps the connection for :meth:`run`.

        Raises:
            InputError: the address does not answer or is not Ray, no node has the resources for one run, or
                rlaudit or an algorithm does not import on some node.
        """
        ray = _import_ray()
        if self._checked is not None and set(self._checked) >= {s.algorithm.name for s in specs}:
            return
        if not ray.is_initialized():
            self._owns_ray = self._connect(ray)
        self._check_cluster(ray, specs)
        self._checked = {s.algorithm.name for s in specs}

    def run(self, specs: Sequence[RunSpec], sink: EventSink) -> None:
        """Execute ``specs`` on the cluster in their order (the driver's: longest first), reporting to ``sink`` as
        events arrive.

        Raises:
            InputError: Ray missing, address unreachable, resources or imports missing on the cluster (all
                before any run is submitted).
            KeyboardInterrupt: after cancelling every outstanding task.
        """
        ray = _import_ray()
        self.node_counts = {}
        if not specs:
            return
        try:
            self.check(specs)
            self._sweep(ray, specs, sink)
        finally:
            self._shutdown(ray, started=self._owns_ray)
            self._checked = None
        self._print_nodes(sink)

    def _sweep(self, ray, specs: Sequence[RunSpec], sink: EventSink) -> None:
        from ray.exceptions import NodeDiedError, OutOfMemoryError, RayActorError, RayTaskError, WorkerCrashedError
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = ray.get_runtime_context().get_node_id()
        inbox = ray.remote(_Inbox).options(
            num_cpus=0, max_restarts=0, name=f"rlaudit-inbox-{uuid.uuid4().hex[:8]}",
            scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=True)).remote()
        from rlaudit.run.backends import make_batches
        from rlaudit.run.executors import batch_error
        from rlaudit.run.spec import RunResult

        task = ray.remote(_train)
        pending = {}  # task ref -> its batch of runs
        for batch in make_batches(specs):
            ref = task.options(num_cpus=self.cpus_per_run, num_gpus=self.gpus_per_run, max_retries=self.max_retries,
                               retry_exceptions=False, name=f"{TASK_PREFIX}{batch[0].run_id}").remote(batch, inbox)
            pending[ref] = batch
        router = _EventRouter(sink, self._count)
        lost = (WorkerCrashedError, NodeDiedError, OutOfMemoryError)

        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=POLL_INTERVAL_S)
                try:
                    router.dispatch(ray.get(inbox.drain.remote()))
                except RayActorError as exc:
                    self._inbox_lost(ray, pending, router, sink, exc)
                    return
                for ref in ready:
                    batch = pending.pop(ref)
                    node = router.node_of(batch[0].run_id)
                    try:
                        attempt, outcomes = ray.get(ref)
                    except RayTaskError as exc:
                        self._fail(node, sink, batch, batch_error(batch, _remote_traceback(exc)))
                    except lost as exc:
                        self._fail(node, sink, batch, f"{exc}\n{type(exc).__name__}: the run's Ray worker was lost "
                                                      f"{self.max_retries + 1} time(s) (--max-retries {self.max_retries})")
                    except Exception as exc:  # noqa: BLE001 - runtime_env setup, unschedulable, …: the run's data
                        self._fail(node, sink, batch, f"{exc}\n{type(exc).__name__}: {_first_line(exc)}")
                    else:
                        for spec, outcome in zip(batch, outcomes):
                            if not router.is_live(spec.run_id, attempt):  # cannot happen: the start precedes it
                                raise RuntimeError(f"{spec.run_id}: result of an unannounced attempt")
                            if isinstance(outcome, RunResult):
                                self._count(node, "done")
                                sink.finished(outcome)
                            else:
                                self._count(node, "failed")
                                sink.failed(spec.run_id, outcome)
                if self.run_timeout is not None:
                    self._stop_overdue(ray, pending, router, sink)
        except BaseException:  # Ctrl-C above all: cancel what is still queued or training
            for ref in pending:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - Ray itself may be what failed; keep the first error
                    pass
            raise
        finally:
            try:
                ray.kill(inbox)
            except Exception:  # noqa: BLE001 - the cluster may be gone; nothing left to clean
                pass

    def _fail(self, node: str, sink: EventSink, batch, error: str) -> None:
        for spec in batch:
            self._count(node, "failed")
            sink.failed(spec.run_id, error)

    def _stop_overdue(self, ray, pending: dict, router: _EventRouter, sink: EventSink) -> None:
        """Cancel (force: the worker process is killed) every batch past its limit (``run_timeout`` per run of it,
        :func:`~rlaudit.run.spec.batch_timeout`) and record its runs timed out; the sweep goes on with the others."""
        by_run = {batch[0].run_id: ref for ref, batch in pending.items()}
        limits = {batch[0].run_id: batch_timeout(self.run_timeout, len(batch)) for batch in pending.values()}
        for first in router.overdue(limits):
            ref = by_run[first]
            worker, node = router.live[first][1], router.node_of(first)
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - the task may have just finished or its node be gone
                pass
            batch = pending.pop(ref)
            for spec in batch:
                router.stop(spec.run_id)
                self._count(node, "failed")
                sink.failed(spec.run_id, timed_out_error(spec.run_id, self.run_timeout, worker, len(batch)))

    def _inbox_lost(self, ray, pending: dict, router: _EventRouter, sink: EventSink, exc: BaseException) -> None:
        """The inbox actor died (killed, or its node lost): the events of every unfinished run are gone with
        it, so each is recorded failed (the next ``rlaudit run`` retries it) and its task is cancelled."""
        reason = (f"{type(exc).__name__}: the driver's event inbox (a Ray actor) died mid-sweep, taking this run's "
                  f"unsent evaluations with it; the next 'rlaudit run' retries the run")
        for ref, batch in pending.items():
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - the task may be finished or its node gone
                pass
            for spec in batch:
                self._count(router.node_of(spec.run_id), "failed")
                sink.failed(spec.run_id, f"{_first_line(exc)}\n{reason}")
        pending.clear()

    def _count(self, node: str, what: str) -> None:
        self.node_counts.setdefault(node, Counter())[what] += 1

    def _print_nodes(self, sink: EventSink) -> None:
        """Per-node counts after the sweep, on the driver's console (stderr)."""
        if not self.node_counts:
            return
        console = getattr(sink, "console", None)
        if console is None:
            from rich.console import Console

            console = Console(stderr=True)
        for line in self.summary_lines():
            console.print(line, highlight=False)

    def summary_lines(self) -> list[str]:
        """``ray nodes used: N`` then one line per node: runs done, failed, and attempts lost there."""
        lines = [f"ray nodes used: {len(self.node_counts)}"]
        for node, c in sorted(self.node_counts.items()):
            lines.append(f"  {node}: {c['done']} done, {c['failed']} failed, {c['lost']} lost (retried)")
        return lines


def _count_of(node: dict, resource: str) -> str:
    n = node["Resources"].get(resource, 0)
    return f"{n:g} {resource}" + ("" if n == 1 else "s")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _remote_traceback(exc) -> str:
    """The remote traceback text of a :class:`ray.exceptions.RayTaskError`, ending with the error line."""
    text = getattr(exc, "traceback_str", None) or "".join(traceback.format_exception(exc))
    cause = getattr(exc, "cause", None)
    if cause is not None:
        last = f"{type(cause).__name__}: {cause}"
        if not text.rstrip().endswith(last):
            text = text.rstrip() + "\n" + last
    return text
