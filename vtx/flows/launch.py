"""Launching a template from the terminal: the plan shown, confirmed, walked (jobs.launch), each
event printed, the run followed; run by `vtx launch` and by `vtx demo`."""

from __future__ import annotations

from rich.console import Console

from jobs.core.stack import StackOutputs
from jobs.launch.plan import LaunchOptions, LaunchPlan, plan_launch
from jobs.launch.run import Event, Follow, Runner
from jobs.quota.cloud_quotas import QuotaReader
from jobs.runs.logs import LogSource
from jobs.spec.template import JobTemplate
from jobs.vertex.client import Vertex
from jobs.vertex.rest import VertexRest
from vtx.confirm import Ask, confirmed
from vtx.flows import study_watch
from vtx.flows.controlled import launch_controlled
from vtx.flows.follow import LogView, follow_run, log_source
from vtx.flows.model_upload import upload_run_model
from vtx.options import (
    api_errors,
)
from vtx.views.launch import print_event, print_launch_plan
from vtx.views.problems import print_problems


class LaunchView:
    """What `vtx launch` says of each move of the runner (`jobs.launch.run`), and the following
    a ``Follow`` asks for: the logs streamed, the exit code sent back."""

    def __init__(self, out: Console, plan: LaunchPlan, runner: Runner, stack: StackOutputs):
        self.out, self.plan, self.runner, self.stack = out, plan, runner, stack
        self.view = LogView(out)
        self.source: LogSource | None = None
        """A ladder's one log source: each following goes on where the last stopped."""

    def show(self, event: Event) -> int | None:
        if isinstance(event, Follow):
            return self.follow(event.name)
        print_event(self.out, self.plan, self.runner.follow, event)
        return None

    def walk(self) -> int:
        """Take the runner's events to its end, here in the CLI: the runner never calls back up.
        Each event is shown; a ``Follow`` is answered with the following's exit code."""
        events, reply = self.runner.events(), None
        try:
            while True:
                reply = self.show(events.send(reply))
        except StopIteration as end:
            return end.value

    def follow(self, name: str) -> int:
        out, poll_s = self.out, self.runner.poll_s
        if self.plan.study is not None:
            with api_errors(out):
                rest = VertexRest(self.stack)
                return study_watch.follow(out, rest, name, LogView(out).print, poll_s)
        if not self.plan.ladder:
            return follow_run(out, self.runner.rest, name, poll_s, enforce_budget=True)
        self.source = self.source or log_source(self.runner.rest, name)
        return follow_run(
            out, self.runner.rest, name, poll_s, self.view, self.source, enforce_budget=True
        )


def launch_job(
    out: Console,
    template: JobTemplate,
    stack: StackOutputs,
    source: str,
    options: LaunchOptions = LaunchOptions(),
    answer: Ask = Ask(),
    *,
    quotas: QuotaReader | None = None,
    vertex: Vertex | None = None,
) -> int:
    """Plan (`jobs.launch.plan`), show, confirm, walk (`jobs.launch.run`); the exit code. A dry
    run stops where the launch would: after the plan, or at a quota refusal. With
    ``options.upload``, a followed run that SUCCEEDED has its model registered."""
    plan = plan_launch(template, stack, source, options, quotas)
    if plan.problems:
        print_problems(out, plan.problems)
        return 1
    question = (
        "Submit this study?" if plan.study is not None
        else "Submit this run, walking its ladder?" if plan.ladder
        else "Submit this job?"
    )  # fmt: skip

    def submit() -> int:
        if stack.controller:
            with api_errors(out, "not submitted"):
                code = launch_controlled(out, plan, stack, options.follow, options.poll_s, vertex)
            if code or not options.follow or options.upload is None or plan.study is not None:
                return code
            return upload_run_model(out, stack, plan.run_id, options.upload, answer)
        runner = Runner(plan, vertex or Vertex(stack), follow=options.follow, poll_s=options.poll_s)
        view = LaunchView(out, plan, runner, stack)
        if plan.ladder:  # the walk turns create errors into its decisions
            return view.walk()
        with api_errors(out, "not submitted"):
            code = view.walk()
        if code or not options.follow or options.upload is None or plan.study is not None:
            return code
        return upload_run_model(out, stack, plan.run_id, options.upload, answer)

    stop = confirmed(
        out, lambda: print_launch_plan(out, plan), answer, question,
        refusal=plan.refusal, refused="error" if plan.ladder else "not submitted",
    )  # fmt: skip
    return submit() if stop is None else stop
