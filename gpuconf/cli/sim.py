"""``gpuconf sim``: run a simulated GPU cluster, or only its node agents, and list what it knows."""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from gpuconf.errors import EXIT_ENVIRONMENT, EXIT_OK, UsageError


def add_sim_parser(sub: Any) -> None:
    p = sub.add_parser("sim", help="run a simulated GPU cluster (no GPUs, no Kubernetes needed)",
                       description="The simulated GPU cluster the suite is tested against: a fake API server, "
                       "a scheduler and node agents playing kubelet, device plugin, toolkit, GFD and the DRA driver.")
    ssub = p.add_subparsers(dest="sim_command", required=True, parser_class=type(p))
    serve = ssub.add_parser("serve", help="run a whole simulated cluster until Ctrl-C",
                            description="Start a simulated cluster from a profile and write a kubeconfig that kubectl "
                            "and `pytest suites/ --kubeconfig` can use.")
    serve.add_argument("--profile", required=True, help="a shipped profile name (gpuconf sim profiles) or a YAML file")
    serve.add_argument("--port", type=int, default=0, help="API server port (default: a free one)")
    serve.add_argument("--kubeconfig-out", required=True, metavar="PATH", help="where to write the kubeconfig")
    serve.add_argument("--api-faults", type=float, default=0.0, metavar="RATE",
                       help="inject API faults into RATE (0..1, e.g. 0.05) of the requests of every client but the "
                       "simulated node agents: 429 with Retry-After 1, 500 and dropped connections in equal shares, "
                       "and watches cut cleanly or abruptly")
    serve.add_argument("--watch-cuts", type=float, metavar="RATE",
                       help="with --api-faults: cut this share of the watches (default: RATE)")
    serve.add_argument("--seed", type=int, default=0, help="seed of the --api-faults draws (default 0)")
    serve.add_argument("--throttle", metavar="RESOURCES",
                       help="an API server overloaded for good on these resources (comma-separated, e.g. pods or "
                       "pods,resourceclaims): every request of every client but the simulated node agents that "
                       "touches one is answered 429 as Priority and Fairness answers it (plain text, Retry-After 1)")
    serve.add_argument("--faults-summary", metavar="PATH",
                       help="on exit, write the faults injected, counted by mode, to PATH as JSON")
    serve.set_defaults(func=_cmd_serve)
    agents = ssub.add_parser("agents", help="run only the node agents against an existing API server",
                             description="Register the profile's nodes on an existing cluster (kind, a real control "
                             "plane, or another gpuconf sim) and act as their kubelets, device plugins and DRA driver.")
    agents.add_argument("--kubeconfig", required=True, help="kubeconfig of the target cluster")
    agents.add_argument("--context", help="kubeconfig context")
    agents.add_argument("--profile", required=True, help="a shipped profile name or a YAML file")
    agents.add_argument("--address", default="127.0.0.1",
                        help="the nodes' InternalIP: an address of this machine the API server can reach, so it "
                        "can fetch pod logs from the agents' HTTPS log endpoint (default 127.0.0.1)")
    agents.add_argument("--log-port", type=int, default=0, help="port of that endpoint (default: a free one)")
    agents.set_defaults(func=_cmd_agents)
    profiles = ssub.add_parser("profiles", help="list the shipped profiles")
    profiles.set_defaults(func=_cmd_profiles)
    faults = ssub.add_parser("faults", help="list the fault catalog: each fault and the check that must catch it")
    faults.set_defaults(func=_cmd_faults)


@contextlib.contextmanager
def _stop_on_signal() -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM while the block runs; the previous handlers come back
    after it. Installed before anything is announced, so a signal sent right after the "running"
    line still stops the command cleanly."""
    done = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: done.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield done
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _cmd_serve(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from gpuconf.sim.cluster import SimulatedCluster
    from gpuconf.sim.faults import AGENT_USER_AGENT, FaultPlan

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be 0..65535, not {args.port}")
    out = Path(args.kubeconfig_out)
    if not out.parent.is_dir():
        raise UsageError(f"--kubeconfig-out: no such directory: {out.parent}")
    if not 0.0 <= args.api_faults < 1.0:
        raise UsageError(f"--api-faults must be a rate in [0, 1), not {args.api_faults}")
    if args.watch_cuts is not None and not 0.0 <= args.watch_cuts < 1.0:
        raise UsageError(f"--watch-cuts must be a rate in [0, 1), not {args.watch_cuts}")
    summary = Path(args.faults_summary) if args.faults_summary else None
    if summary is not None and not summary.parent.is_dir():
        raise UsageError(f"--faults-summary: no such directory: {summary.parent}")
    plan = FaultPlan(seed=args.seed)
    if args.throttle is not None:
        resources = [r.strip() for r in args.throttle.split(",") if r.strip()]
        if not resources:
            raise UsageError("--throttle: name at least one resource (e.g. pods)")
        plan.throttle(resources=resources, exempt_user_agents=(AGENT_USER_AGENT,))
    if args.api_faults:
        plan.steady(args.api_faults, watch_cuts=args.watch_cuts)
    sim = SimulatedCluster(args.profile, port=args.port, faults=plan)
    with _stop_on_signal() as stop:
        try:
            return _serve(sim, out, stop, stdout, stderr)
        finally:
            if args.api_faults or args.throttle or summary is not None:
                counts = plan.summary()
                stderr.write("gpuconf sim serve: API faults injected: "
                             + ", ".join(f"{mode} {n}" for mode, n in counts.items()) + "\n")
                if summary is not None:
                    summary.write_text(json.dumps(counts, indent=2) + "\n")


def _serve(sim: Any, out: Path, stop: threading.Event, stdout: TextIO, stderr: TextIO) -> int:
    try:
        sim.start()
    except OSError as exc:
        stderr.write(f"gpuconf sim serve: cannot start the API server: {exc}\n")
        return EXIT_ENVIRONMENT
    try:
        sim.write_kubeconfig(out)
        stdout.write(f"{sim.summary()} (started in {sim.startup_s:.1f} s)\n"
                     f"kubeconfig: {out}\n  kubectl --kubeconfig {out} get nodes\nCtrl-C stops it.\n")
        stdout.flush()
        stop.wait()
    finally:
        sim.stop()
    return EXIT_OK


def _cmd_agents(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from kubernetes import config as kconfig
    from kubernetes.config.config_exception import ConfigException

    from gpuconf.sim.agent import NodeAgents
    from gpuconf.sim.profile import expand, load_profile

    try:
        ipaddress.ip_address(args.address)
    except ValueError as exc:
        raise UsageError(f"--address: not an IP address: {args.address!r}") from exc
    if not 0 <= args.log_port <= 65535:
        raise UsageError(f"--log-port must be 0..65535, not {args.log_port}")
    cluster = expand(load_profile(args.profile))
    if not Path(args.kubeconfig).is_file():
        raise UsageError(f"--kubeconfig: no such file: {args.kubeconfig}")
    try:
        api = kconfig.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=args.kubeconfig, context=args.context)
    except (ConfigException, Exception) as exc:  # a malformed file raises yaml/type errors, not only these
        raise UsageError(f"--kubeconfig {args.kubeconfig}: not a usable kubeconfig: {exc}") from exc
    agents = NodeAgents(cluster, api, address=args.address, log_port=args.log_port)
    with _stop_on_signal() as stop:
        return _run_agents(agents, cluster, stop, stdout, stderr)


def _run_agents(agents: Any, cluster: Any, stop: threading.Event, stdout: TextIO, stderr: TextIO) -> int:
    try:
        agents.start()
    except Exception as exc:  # the cluster is unreachable or refuses us: one line, no traceback
        stderr.write(f"gpuconf sim agents: cannot register the nodes: {exc}\n")
        agents.stop()
        return EXIT_ENVIRONMENT
    try:
        stdout.write(f"node agents for {len(cluster.nodes)} nodes of {cluster.profile.name} running; Ctrl-C stops "
                     "them\n")
        stdout.flush()
        stop.wait()
    finally:
        agents.stop()
    return EXIT_OK


def _cmd_profiles(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from gpuconf.sim.profile import expand, load_profile, shipped_profiles

    for name in shipped_profiles():
        profile = load_profile(name)
        nodes = expand(profile).nodes if sum(p.count for p in profile.pools) <= 64 else None
        size = (f"{len(nodes)} nodes, {sum(len(n.gpus) for n in nodes)} GPUs" if nodes is not None else
                f"{sum(p.count for p in profile.pools)} nodes")
        first = " ".join(profile.description.split()).split(". ")[0].rstrip(".")
        stdout.write(f"{name:20s} {size:24s} {first}\n")
    return EXIT_OK


def _cmd_faults(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from gpuconf.sim.profile import fault_catalog

    pad = " " * 27
    targets = {"gpu": "pool, node (or all), gpu", "node": "pool, node (or all)", "cluster": "the whole cluster"}
    for fault in fault_catalog().values():
        stdout.write(f"{fault.id:26s} {fault.summary}\n{pad}caught by {fault.check} ({fault.suite}), "
                     f"{fault.severity}\n"
                     f"{pad}targets: {targets[fault.scope]}\n")
        for param in fault.parameters:
            choices = f"; one of {', '.join(map(str, param.enum))}" if param.enum else ""
            default = param.default if isinstance(param.default, str) else json.dumps(param.default)
            stdout.write(f"{pad}{param.name}: {param.type}, default {default}{choices}: {param.description}\n")
        example = {"gpu": ", pool: POOL, node: 0, gpu: 0", "node": ", pool: POOL, node: 0", "cluster": ""}[fault.scope]
        given = "".join(f", {param.name}: {json.dumps(param.default)}" for param in fault.parameters[:1]
                        if param.default is not None)
        stdout.write(f"{pad}in a profile: faults: [{{id: {fault.id}{example}{given}}}]\n")
    return EXIT_OK
