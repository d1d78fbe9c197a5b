"""A fuzz run's findings: their signatures, and the output folder that keeps them."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shlex
import xml.etree.ElementTree as ET

from hlogen import files
from hlogen.differential.bisection import bisect
from hlogen.differential.comparison import EXACT_MATH, MAJORITY, UNDECIDED, Side, compare
from hlogen.differential.near import Tolerance
from hlogen.differential.report import report_of
from hlogen.differential.reproduce import route
from hlogen.errors import HlogenError, InputError
from hlogen.runtime import xla_options as options_of

SUMMARY, JUNIT = "summary.json", "junit.xml"
BISECT_SECONDS = 60  # one compile and run of a report's bisection (a hang ends there)


@dataclasses.dataclass(frozen=True)
class Signature:
    """What a triager files once: the kind ("divergence", "error on SIDE", "crash of
    SIDE"), the difference (the class of the difference where it is born, the error's
    class, or the signal), the op where a divergence is born (hlogen.differential.origin),
    the side exact math finds wrong there (`wrong`: "cpu wrong", "interpret wrong", or
    "undetermined"; hlogen.differential.arbiter; where it cannot judge and a third side
    runs, the majority: "cpu wrong (by majority with iree)", or "all three apart (with
    iree)": `by_majority`), and a gist (an error's message, or what explains a divergence
    at no op in particular)."""

    kind: str
    difference: str
    at: str | None = None
    gist: str | None = None
    wrong: str | None = None

    def __str__(self) -> str:
        """The cause, once: where a divergence is born, of which class, who is wrong
        ("divergence at stablehlo.power (integer): cpu wrong")."""
        if self.at:
            said = f"{self.kind} at {self.at} ({self.difference})"
            said += f": {self.wrong}" if self.wrong else ""
        else:
            said = f"{self.kind} ({self.difference})"
        return said + (f": {self.gist}" if self.gist else "")


@dataclasses.dataclass
class Finding:
    """One signature: what differed, reduced, and where its reproducer is."""

    signature: str
    kind: str             # "divergence", "error on cpu", "crash of cpu"
    difference: str       # "value", "subnormal", ...; "ExecutionError", ...; "SIGABRT"
    at: str | None        # the op where the sides first differ (a divergence)
    gist: str | None      # an error's message, normalized; or why a divergence is at no op
    ops: list             # of the reduced module (constants aside), sorted
    program: str          # where the program came from: generate(...) or a corpus module
    message: str          # what differed on the reduced module
    module: str           # the reproducer's files, in the output folder
    inputs: str | None
    command: str | None
    op_count: int         # of the reduced module
    original_op_count: int
    reduce_seconds: float
    timed_out: bool       # the reduction stopped at its time limit
    verdict: str | None = None  # the arbiter's, at the origin (a divergence's)
    wrong: str | None = None    # "cpu wrong", "interpret wrong", "undetermined"; with a
    # third side, also "cpu wrong (by majority with iree)", "all three apart (with iree)"
    reason: str | None = None   # the arbiter's, in one sentence
    exact: list | None = None   # the exact values of the differing elements there
    ulps: dict | None = None    # each side's largest error there, in ULPs
    note: str | None = None     # what the reduction could not keep, where it could not
    new: bool = True      # not in the folder's summary before this run
    seen: int = 1         # programs of this run that showed it
    report: str | None = None  # NAME.report.md

    @property
    def decided_by(self) -> str | None:
        """Who named the wrong side: "exact math" (the arbiter), "majority" (a third side,
        where exact math could not), or None (nobody: undetermined, all three apart)."""
        if self.wrong is None:
            return None
        if MAJORITY_WITH in self.wrong:
            return MAJORITY
        return EXACT_MATH if self.wrong.endswith(" wrong") or \
            self.wrong.startswith("allowed") else None

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "decided_by": self.decided_by}


# the words of a signature's `wrong` that a third side's majority gave
MAJORITY_WITH, APART = "by majority with", "all three apart"


def by_majority(sides: tuple, third: Side, tolerance: Tolerance, candidate, inputs,
                of_result: int, runner) -> str:
    """A signature's `wrong` where exact math cannot judge the origin (the arbiter's
    "undetermined") and a `third` side runs: the three sides run `candidate` on `inputs`
    (`runner(side, module, inputs)`: the triage's children), and result `of_result`'s verdict
    (hlogen.differential.comparison.three_way) names the side the two others agree
    against: "cpu wrong (by majority with iree)"; "all three apart (with iree)" where no
    two agree; "undetermined" where one agrees with both others, or a side fails."""
    try:
        verdicts = compare(candidate, inputs, *sides, tolerance=tolerance, also=third,
                           runner=runner).verdicts
    except HlogenError:
        return "undetermined"
    verdict = verdicts[of_result] if of_result < len(verdicts) else UNDECIDED
    if verdict in ("test", "reference"):
        wrong = sides[0] if verdict == "test" else sides[1]
        return f"{wrong.label} wrong ({MAJORITY_WITH} {third.label})"
    if verdict == "apart":
        return f"{APART} (with {third.label})"
    return "undetermined"


@dataclasses.dataclass
class Fuzzed:
    """What a fuzz run did and found (`findings`: this run's signatures, new or not)."""

    test: Side
    reference: Side
    tolerance: Tolerance
    seed: int
    seconds: float = 0.0
    programs: int = 0     # generated or taken from the corpus
    generated: int = 0
    from_corpus: int = 0
    large_range: int = 0  # programs whose random inputs span the exponent range
    agreed: int = 0
    reducing: float = 0.0  # seconds spent reducing findings and writing their reports
    skipped: dict = dataclasses.field(default_factory=dict)  # why -> count
    allowed: dict = dataclasses.field(default_factory=dict)  # "allowed (CLASS)" -> count:
    # differences the spec allows (at the op where they are born), not findings
    findings: list = dataclasses.field(default_factory=list)
    interrupted: BaseException | None = None  # what ended the run early (a signal)
    third: Side | None = None  # the third side (fuzz's `also`), where one runs

    @property
    def new(self) -> list:
        return [f for f in self.findings if f.new]

    def to_json(self) -> dict:
        return {"test": self.test.to_json(), "reference": self.reference.to_json(),
                "tolerance": self.tolerance.to_json(), "seed": self.seed,
                "seconds": round(self.seconds, 3), "programs": self.programs,
                "generated": self.generated, "from_corpus": self.from_corpus,
                "large_range": self.large_range, "agreed": self.agreed,
                "reducing_seconds": round(self.reducing, 3), "skipped": dict(self.skipped),
                "allowed": dict(self.allowed),
                "new": len(self.new), "findings": [f.to_json() for f in self.findings],
                "stopped": None if self.interrupted is None else str(self.interrupted),
                **({"third": self.third.to_json(),
                    "by_majority": sum(f.decided_by == MAJORITY for f in self.findings)}
                   if self.third is not None else {})}

    def text(self) -> str:
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items()))
        allowed = ", ".join(f"{n} {why[len('allowed '):].strip('()')}"
                            for why, n in sorted(self.allowed.items()))
        lines = [f"{self.programs} programs in {self.seconds:.0f} s ({self.generated} generated, "
                 f"{self.from_corpus} from the corpus): {self.agreed} agreed, "
                 f"{len(self.findings)} signature(s) found, {len(self.new)} new"
                 + (f"; allowed by the spec: {allowed}" if allowed else "")
                 + (f"; third side {self.third.label}: "
                    f"{sum(f.decided_by == MAJORITY for f in self.findings)} named wrong by "
                    f"majority" if self.third is not None else "")
                 + (f"; skipped: {skipped}" if skipped else "")
                 + (f"; stopped by {self.interrupted}: partial" if self.interrupted else "")]
        for f in self.findings:
            lines.append(f"{'new' if f.new else 'known'}: {f.signature} ({f.seen} program(s); "
                         f"{f.original_op_count} -> {f.op_count} ops) {f.module}")
            if f.command:
                lines.append(f"  {f.command}")
        return "\n".join(lines)


# -- the output folder ----------------------------------------------------------------------

class Outputs:
    """Files in the output folder, each written whole (hlogen.files.Output)."""

    def __init__(self, folder):
        self.folder = folder

    def path(self, name: str) -> str:
        return os.path.join(str(self.folder), name)

    def write(self, name: str, data: bytes) -> None:
        files.Output(self.path(name), "-o").write(data)


def _name(signature: str) -> str:
    """A file name for a signature: its words, and a digest that keeps names apart."""
    words = re.sub(r"[^a-z0-9]+", "-", signature.lower().replace("stablehlo.", "")).strip("-")
    return f"{words[:60].rstrip('-')}-{hashlib.sha256(signature.encode()).hexdigest()[:8]}"


def save(outputs: Outputs, finding: Finding, reduced, sides: tuple | None = None,
         tolerance: Tolerance | None = None, third: Side | None = None) -> None:
    """The reproducer of `finding`: NAME.mlir, NAME.inputs.npz (when it has inputs), NAME.txt
    (the signature, the program, what differs, the command: with the `third` side, where
    its majority named the wrong side), and, given the run's `sides` and `tolerance`,
    NAME.report.md (hlogen.differential.report: what a maintainer acts on)."""
    name = _name(finding.signature)
    finding.module = outputs.path(f"{name}.mlir")
    outputs.write(f"{name}.mlir", reduced.computation.as_text().encode())
    if reduced.inputs:
        finding.inputs = outputs.path(f"{name}.inputs.npz")
        outputs.write(f"{name}.inputs.npz", reduced.npz())
    finding.command = reduced.command(finding.module, finding.inputs)
    if third is not None and (finding.decided_by == MAJORITY or
                              (finding.wrong or "").startswith(APART)):
        finding.command += " " + shlex.join(["--also", route(third)] + [
            w for option in third.xla_options for w in ("--also-flag", options_of.text((option,)))])
    outputs.write(f"{name}.txt", "\n".join([
        finding.signature, f"from: {finding.program}",
        f"reduced: {finding.original_op_count} -> {finding.op_count} ops in "
        f"{finding.reduce_seconds:.1f} s" + (" (stopped at its time limit)"
                                              if finding.timed_out else ""),
        *([f"the cause kept: {finding.note}"] if finding.note else []),
        "", finding.message, "", f"to see it: {finding.command}", ""]).encode())
    if sides is not None:
        finding.report = outputs.path(f"{name}.report.md")
        outputs.write(f"{name}.report.md", report_text(finding, reduced, sides, tolerance).encode())


def report_text(finding: Finding, reduced, sides: tuple, tolerance: Tolerance) -> str:
    """The report of a reduced finding (its module, inputs, the run's sides and rule); the
    XLA pass bisected where the test side may be the wrong one."""
    kind = "divergence" if finding.kind == "divergence" else finding.kind
    inputs = list(reduced.inputs or [])
    bisected = None
    # (not where exact math, or a third side's majority, finds the reference wrong: no
    # XLA pass to look for)
    reference_wrong = finding.verdict == "reference wrong" or (
        finding.decided_by == MAJORITY and finding.wrong.startswith(f"{sides[1].label} wrong"))
    if kind == "divergence" and sides[0].declared.compiles and not reference_wrong:
        try:
            bisected = bisect(reduced.computation, inputs, sides[0], sides[1],
                              **_keywords(tolerance), seconds=BISECT_SECONDS)
        except HlogenError:
            bisected = None
    try:
        text = report_of(reduced.computation, inputs, sides[0], sides[1], tolerance,
                         kind=kind, message=finding.message, bisected=bisected).markdown()
        return _with_third(text, finding)
    except Exception as e:  # (a by-product: it says why it is missing, the run goes on)
        return f"# {finding.signature}\n\nno report: {type(e).__name__}: {e}\n"


def _with_third(markdown: str, finding: Finding) -> str:
    """A report with, under its verdict, what the third side's majority said where exact
    math could not judge."""
    wrong = finding.wrong or ""
    if finding.decided_by != MAJORITY and not wrong.startswith(APART):
        return markdown
    said = (f"**By majority:** {wrong}: the two other sides agree against it (exact math "
            f"could not judge; two sides agreeing is no proof)." if finding.decided_by ==
            MAJORITY else f"**Third side:** {wrong}: no two sides agree.")
    head, verdict, rest = markdown.partition("\n**Verdict:**")
    if not verdict:
        return f"{markdown.rstrip()}\n\n{said}\n"
    line, _, rest = rest.partition("\n")
    return f"{head}{verdict}{line}\n\n{said}\n{rest}"


def _keywords(tolerance: Tolerance) -> dict:
    return {"abs": tolerance.abs, "rel": tolerance.rel, "ulp": tolerance.ulp,
            "bitwise": tolerance.bitwise}


def kept(finding: Finding, known: dict) -> bool:
    """Whether the folder's reproducer of `finding`'s signature stays (it is there, and
    not larger: a re-run never replaces a smaller reproducer by a larger one; another
    cause has another signature, and so another file); `finding` then takes its files,
    its size and what it showed."""
    old = known.get(finding.signature)
    if old is None or not os.path.exists(str(old.get("module", ""))) or \
            not isinstance(old.get("op_count"), int) or old["op_count"] > finding.op_count:
        return False
    for field in ("module", "inputs", "command", "report", "op_count", "ops", "message",
                  "verdict", "reason", "exact", "ulps"):
        if field in old:
            setattr(finding, field, old[field])
    return True


def known_signatures(folder) -> dict:
    """The findings of the folder's summary (signature -> JSON), {} when it has none."""
    path = os.path.join(str(folder), SUMMARY)
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return {f["signature"]: f for f in data["findings"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: not a summary of hlogen fuzz ({e}); move it away or "
                         f"choose another folder") from None


def summary(run: Fuzzed, known: dict) -> bytes:
    """This run's summary, with the signatures the folder held before that it did not see."""
    data = run.to_json()
    seen = {f.signature for f in run.findings}
    data["earlier"] = [f for s, f in known.items() if s not in seen]
    return (json.dumps(data, indent=1) + "\n").encode()


def junit(run: Fuzzed) -> bytes:
    """JUnit XML: one testcase per signature found (a failure when new, skipped when the
    folder knew it), and one for the programs that agreed."""
    root = ET.Element("testsuites", name="hlogen fuzz", time=f"{run.seconds:.3f}")
    suite = ET.SubElement(root, "testsuite", name=f"fuzz.{run.test.label} vs {run.reference.label}",
                          tests=str(len(run.findings) + 1), failures=str(len(run.new)),
                          errors="0", skipped=str(len(run.findings) - len(run.new)),
                          time=f"{run.seconds:.3f}")
    agreed = ET.SubElement(suite, "testcase", classname="fuzz", name="programs that agree",
                           time=f"{run.seconds:.3f}")
    ET.SubElement(agreed, "system-out").text = (f"{run.agreed} of {run.programs} programs "
                                                f"agree")
    for f in run.findings:
        case = ET.SubElement(suite, "testcase", classname="fuzz", name=f.signature,
                             time=f"{f.reduce_seconds:.3f}", file=f.module)
        details = f"{f.message}\n\nto see it: {f.command}"
        if f.new:
            ET.SubElement(case, "failure", type=f.kind, message=f.signature).text = details
        else:
            ET.SubElement(case, "skipped", message=f"known: {f.signature}").text = details
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


# -- the corpus -----------------------------------------------------------------------------

