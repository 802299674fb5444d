"""The typed clients of a run's actors, without Ray: each client method is one call on the
actor holding the part, naming the method and passing the arguments as given, and a client
survives pickling (it travels inside actor specs)."""
import pickle

from pairflow.engine.pairs.workers.clients import MetricsClient, NodeCacheClient, SchedulerClient


class FakeHandle:
    """Records what an actor handle would be asked to run: ``handle.method.remote(...)``."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, method):
        if method.startswith("__"):
            raise AttributeError(method)
        calls = self.calls

        class Method:
            def remote(self, *args, **kwargs):
                calls.append((method, args, kwargs))
                return f"ref:{method}"

        return Method()


def test_a_scheduler_call_is_one_call_on_the_coordinator():
    h = FakeHandle()
    s = SchedulerClient(h)
    assert s.complete_and_request("dev-0", 7, [], None, "node-0", [1], [2], [3]) == \
        "ref:complete_and_request"
    assert s.request("dev-0", "node-0") == "ref:request"
    assert s.next_uses([4, 5]) == "ref:next_uses"
    assert h.calls == [
        ("complete_and_request", ("dev-0", 7, [], None, "node-0", [1], [2], [3], None), {}),
        ("request", ("dev-0", "node-0", (), (), (), None), {}),
        ("next_uses", ([4, 5], None), {}),
    ]


def test_metrics_close_is_not_the_schedulers_close():
    h = FakeHandle()
    MetricsClient(h).close()
    SchedulerClient(h).close()
    MetricsClient(h).record([{"kind": "tile"}])
    assert [c[0] for c in h.calls] == ["close_metrics", "close", "record"]


def test_a_node_cache_in_the_coordinator_is_reached_by_its_cache_methods():
    own, coord = FakeHandle(), FakeHandle()
    NodeCacheClient(own).get([1, 2])
    NodeCacheClient(coord, in_coordinator=True).get([1, 2])
    NodeCacheClient(coord, in_coordinator=True).stats()
    NodeCacheClient(own).ready()
    assert own.calls == [("get", ([1, 2],), {}), ("ready", (), {})]
    assert coord.calls == [("cache_get", ([1, 2],), {}), ("cache_stats", (), {})]


def test_clients_pickle_with_their_handle():
    for client in (SchedulerClient("h"), MetricsClient("h")):
        assert pickle.loads(pickle.dumps(client)).handle == "h"
    c = pickle.loads(pickle.dumps(NodeCacheClient("h", in_coordinator=True)))
    assert (c.handle, c.in_coordinator) == ("h", True)


def _methods(path, cls):
    """The methods a class defines, read from its source (the Ray actors are these classes,
    wrapped by Ray on first use: the wrapping imports Ray, which no unit test may)."""
    import ast
    from pathlib import Path
    tree = ast.parse((Path(__file__).parents[2] / path).read_text())
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return {f.name for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _called(client, skip=()):
    """Every method name ``client`` calls on its handle, calling each of its methods once."""
    import inspect
    h = FakeHandle()
    c = client(h)
    for name, fn in inspect.getmembers(type(c), inspect.isfunction):
        if name.startswith("_") or name in skip:
            continue
        n_args = len([p for p in inspect.signature(fn).parameters.values()
                      if p.default is p.empty]) - 1
        getattr(c, name)(*range(n_args))
    return {m for m, _, _ in h.calls}


def test_every_client_method_exists_on_the_actor_it_calls():
    coordinator = _methods("engine/pairs/workers/coordinator.py", "CoordinatorCore")
    assert _called(SchedulerClient) <= coordinator
    assert _called(MetricsClient) <= coordinator
    assert _called(lambda h: NodeCacheClient(h, in_coordinator=True)) <= coordinator
    assert _called(NodeCacheClient) <= _methods("engine/pairs/workers/actors.py", "NodeCacheWorker")
