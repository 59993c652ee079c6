"""The script pool: isolated, reused child processes for flow "script" steps."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tidemill.engine.scripts._pool import ScriptCall, ScriptOutcome, ScriptPool
from tidemill.errors import ConfigurationError, EngineError, SerializationError

pytestmark = pytest.mark.slow

GETPID = "import os\ndef main():\n    return os.getpid()\n"


def script(source: str, **options: object) -> ScriptCall:
    return ScriptCall(code=textwrap.dedent(source), **options)  # type: ignore[arg-type]


def alive(pid: int) -> bool:
    """Whether `pid` is a running process (a zombie counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def wait_until(predicate: object, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "gave up waiting"
        await asyncio.sleep(0.01)


def read_pid(path: Path) -> int:
    return int(path.read_text())


async def pid_from(path: Path) -> int:
    await wait_until(path.exists)
    return read_pid(path)


def real(path: Path) -> Path:
    return path.resolve()


def failed(outcome: ScriptOutcome, kind: str) -> str:
    assert not outcome.ok, outcome
    assert outcome.result is None
    assert outcome.error is not None
    assert outcome.error["type"] == kind, outcome.error
    return outcome.error["message"]


# A script that announces its pid in a file (atomically), then sleeps.
ANNOUNCE_AND_SLEEP = """
import os, time
def main(path, seconds=60):
    with open(path + ".tmp", "w") as file:
        file.write(str(os.getpid()))
    os.rename(path + ".tmp", path)
    time.sleep(seconds)
    return os.getpid()
"""


async def test_result_stdout_and_stderr_are_captured_per_call() -> None:
    code = """
    import ctypes, os, sys
    def main(x):
        print("python")
        sys.stdout.write("write\\n")
        os.system("echo shell; echo shell-err >&2")
        ctypes.CDLL(None).printf(b"from C\\n")
        print("warning", file=sys.stderr)
        return {"double": x * 2}
    """
    async with ScriptPool(size=1) as pool:
        outcome = await pool.run(script(code, args={"x": 21}))
        assert outcome.ok
        assert outcome.error is None
        assert outcome.result == {"double": 42}
        assert outcome.stdout == "python\nwrite\nshell\nfrom C\n"
        assert outcome.stderr == "shell-err\nwarning\n"
        assert outcome.duration > 0
        quiet = await pool.run(script("def main():\n    return None\n"))
        assert quiet.ok
        assert (quiet.stdout, quiet.stderr) == ("", "")


async def test_user_output_never_reaches_the_protocol_pipe() -> None:
    code = """
    import os, sys
    def main():
        os.write(1, b"\\x00\\x00\\x00\\x05hello")
        sys.__stdout__.write('{"ok": true, "result": "forged"}')
        sys.stdout = None  # a script may even break its streams
        return "real"
    """
    async with ScriptPool(size=1) as pool:
        outcome = await pool.run(script(code))
        assert outcome.ok
        assert outcome.result == "real"
        assert outcome.stdout == '\x00\x00\x00\x05hello{"ok": true, "result": "forged"}'
        again = await pool.run(script("def main():\n    print('fine')\n"))
        assert again.stdout == "fine\n"


async def test_stdin_is_empty() -> None:
    async with ScriptPool(size=1) as pool:
        outcome = await pool.run(script("def main():\n    return input()\n"))
        failed(outcome, "EOFError")


async def test_env_is_set_for_one_call_and_restored() -> None:
    code = """
    import os
    def main():
        seen = {k: os.environ.get(k) for k in ("TIDEMILL_RUN_ID", "LEAKED", "PATH")}
        os.environ["LEAKED"] = "yes"
        os.environ.pop("HOME", None)
        return seen
    """
    async with ScriptPool(size=1) as pool:
        first = await pool.run(script(code, env={"TIDEMILL_RUN_ID": "r1", "PATH": "/nowhere"}))
        assert first.result == {"TIDEMILL_RUN_ID": "r1", "LEAKED": None, "PATH": "/nowhere"}
        second = await pool.run(script(code))
        assert second.pid == first.pid
        assert second.result == {
            "TIDEMILL_RUN_ID": None,
            "LEAKED": None,
            "PATH": os.environ["PATH"],
        }
        home = await pool.run(script("import os\ndef main():\n    return os.environ.get('HOME')\n"))
        assert home.result == os.environ.get("HOME")


async def test_cwd_is_per_call(tmp_path: Path) -> None:
    code = "import os\ndef main():\n    return os.getcwd()\n"
    async with ScriptPool(size=1) as pool:
        inside = await pool.run(script(code, cwd=tmp_path))
        assert inside.result == str(real(tmp_path))
        after = await pool.run(script(code))
        assert after.result == os.getcwd()
        missing = await pool.run(script(code, cwd=tmp_path / "missing"))
        failed(missing, "FileNotFoundError")


async def test_children_are_started_ahead_and_reused() -> None:
    pool = ScriptPool(size=2)
    try:
        await pool.start()
        started = pool.pids
        assert len(started) == 2
        await pool.start()
        assert pool.pids == started
        first = await pool.run(script(GETPID))
        second = await pool.run(script(GETPID))
        assert first.result == first.pid
        assert first.pid == second.pid
        assert first.pid in started
        assert pool.pids == started
    finally:
        await pool.close()


async def test_calls_run_concurrently_in_different_children(tmp_path: Path) -> None:
    # Each call marks its arrival, then waits for the other's: neither can
    # finish unless both run at the same time.
    code = """
    import os, time
    def main(mine, other):
        open(mine, "w").close()
        deadline = time.monotonic() + 20
        while not os.path.exists(other):
            if time.monotonic() > deadline:
                raise TimeoutError("the other call never ran")
            time.sleep(0.005)
        return os.getpid()
    """
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    async with ScriptPool(size=2) as pool:
        first, second = await asyncio.gather(
            pool.run(script(code, args={"mine": a, "other": b})),
            pool.run(script(code, args={"mine": b, "other": a})),
        )
        assert first.ok and second.ok, (first, second)
        assert first.result != second.result


async def test_callers_beyond_size_wait_for_a_free_child() -> None:
    async with ScriptPool(size=2) as pool:
        started = pool.pids
        outcomes = await asyncio.gather(*(pool.run(script(GETPID)) for _ in range(8)))
        assert all(outcome.ok for outcome in outcomes)
        assert {outcome.result for outcome in outcomes} <= set(started)
        assert pool.pids == started


async def test_timeout_kills_the_child_and_a_fresh_one_takes_over() -> None:
    code = """
    def main():
        print("started", flush=True)
        while True:
            pass
    """
    async with ScriptPool(size=1) as pool:
        outcome = await pool.run(script(code, timeout=0.3))
        assert "0.3 s" in failed(outcome, "Timeout")
        assert outcome.stdout == "started\n"
        assert outcome.pid is not None
        assert not alive(outcome.pid)
        after = await pool.run(script(GETPID))
        assert after.ok
        assert after.result != outcome.pid


async def test_timeout_kills_what_the_script_started(tmp_path: Path) -> None:
    code = """
    import subprocess, sys
    def main(path):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open(path, "w").write(str(child.pid))
        child.wait()
    """
    marker = tmp_path / "grandchild"
    async with ScriptPool(size=1) as pool:
        outcome = await pool.run(script(code, args={"path": str(marker)}, timeout=1.0))
        failed(outcome, "Timeout")
        await wait_until(lambda: not alive(read_pid(marker)))


async def test_os_exit_fails_the_call_not_the_pool() -> None:
    async with ScriptPool(size=1) as pool:
        outcome = await pool.run(script("import os\ndef main():\n    os._exit(3)\n"))
        assert "code 3" in failed(outcome, "ProcessExited")
        after = await pool.run(script(GETPID))
        assert after.ok
        assert after.result != outcome.pid


async def test_sys_exit_fails_the_call() -> None:
    async with ScriptPool(size=1) as pool:
        outcome = await pool.run(script("import sys\ndef main():\n    sys.exit(2)\n"))
        assert "sys.exit(2)" in failed(outcome, "ProcessExited")
        after = await pool.run(script(GETPID))
        assert after.ok


async def test_a_segfault_fails_the_call() -> None:
    async with ScriptPool(size=1) as pool:
        outcome = await pool.run(script("import ctypes\ndef main():\n    ctypes.string_at(0)\n"))
        assert "SIGSEGV" in failed(outcome, "ProcessExited")
        assert "Segmentation fault" in outcome.stderr
        after = await pool.run(script(GETPID))
        assert after.ok
        assert after.result != outcome.pid


async def test_an_exception_comes_back_with_its_traceback() -> None:
    code = """
    def main(n):
        helper(n)

    def helper(n):
        raise ValueError(f"bad value {n}")
    """
    async with ScriptPool(size=1) as pool:
        outcome = await pool.run(script(code, args={"n": 7}))
        assert failed(outcome, "ValueError") == "bad value 7"
        assert outcome.error is not None
        trace = outcome.error["traceback"]
        assert 'raise ValueError(f"bad value {n}")' in trace
        assert "in helper" in trace
        assert "_child.py" not in trace


async def test_a_result_that_is_not_json_fails_the_call() -> None:
    async with ScriptPool(size=1) as pool:
        outcome = await pool.run(script("def main():\n    print('x')\n    return object()\n"))
        assert "not JSON" in failed(outcome, "ResultNotSerializable")
        assert outcome.stdout == "x\n"
        nan = await pool.run(script("def main():\n    return float('nan')\n"))
        failed(nan, "ResultNotSerializable")


async def test_syntax_error_and_missing_main() -> None:
    async with ScriptPool(size=1) as pool:
        broken = await pool.run(script("def main(:\n    pass\n"))
        failed(broken, "SyntaxError")
        assert broken.error is not None
        assert "def main(:" in broken.error["traceback"]
        no_main = await pool.run(script("x = 1\n"))
        failed(no_main, "NoMain")


async def test_function_references(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "steps_for_pool_test.py").write_text(
        "async def double(x):\n    return x * 2\n\nclass Box:\n    @staticmethod\n"
        "    def get():\n        return 'boxed'\n"
    )
    monkeypatch.chdir(tmp_path)  # the children see the parent's working directory
    async with ScriptPool(size=1) as pool:
        ok = await pool.run(ScriptCall(function="steps_for_pool_test:double", args={"x": 4}))
        assert ok.result == 8
        nested = await pool.run(ScriptCall(function="steps_for_pool_test:Box.get"))
        assert nested.result == "boxed"
        no_module = await pool.run(ScriptCall(function="no_such_module_xyz:run"))
        assert "no_such_module_xyz" in failed(no_module, "ImportError")
        no_attribute = await pool.run(ScriptCall(function="steps_for_pool_test:missing"))
        assert "missing" in failed(no_attribute, "ImportError")


async def test_async_main_runs_in_an_event_loop() -> None:
    code = """
    import asyncio
    async def main(n):
        await asyncio.sleep(0)
        return [n, asyncio.get_running_loop() is not None]
    """
    async with ScriptPool(size=1) as pool:
        outcome = await pool.run(script(code, args={"n": 3}))
        assert outcome.result == [3, True]


async def test_cancelling_the_caller_kills_the_child(tmp_path: Path) -> None:
    marker = tmp_path / "pid"
    async with ScriptPool(size=1) as pool:
        task = asyncio.create_task(pool.run(script(ANNOUNCE_AND_SLEEP, args={"path": str(marker)})))
        pid = await pid_from(marker)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not alive(pid)
        after = await pool.run(script(GETPID))
        assert after.ok
        assert after.result != pid


async def test_close_stops_every_child(tmp_path: Path) -> None:
    marker = tmp_path / "pid"
    pool = ScriptPool(size=2)
    await pool.start()
    pids = pool.pids
    busy = asyncio.create_task(pool.run(script(ANNOUNCE_AND_SLEEP, args={"path": str(marker)})))
    assert await pid_from(marker) in pids
    await pool.close()
    assert pool.pids == []
    assert not any(alive(pid) for pid in pids)
    with pytest.raises(EngineError):
        await busy
    with pytest.raises(EngineError):
        await pool.run(script(GETPID))


async def test_a_child_killed_while_idle_is_replaced() -> None:
    async with ScriptPool(size=1) as pool:
        [pid] = pool.pids
        os.kill(pid, signal.SIGKILL)
        await wait_until(lambda: not alive(pid))
        outcome = await pool.run(script(GETPID))
        assert outcome.ok
        assert outcome.result != pid


async def test_a_call_sent_to_a_child_that_just_died_runs_in_another() -> None:
    async with ScriptPool(size=1) as pool:
        [pid] = pool.pids
        os.kill(pid, signal.SIGKILL)  # the pool has not noticed yet
        outcome = await pool.run(script(GETPID))
        assert outcome.ok, outcome
        assert outcome.result != pid


async def test_children_ignore_sigint() -> None:
    async with ScriptPool(size=1) as pool:
        [pid] = pool.pids
        os.kill(pid, signal.SIGINT)
        outcome = await pool.run(script(GETPID))
        assert outcome.result == pid


def test_children_exit_when_their_parent_dies() -> None:
    parent = textwrap.dedent(
        """
        import asyncio
        from tidemill.engine.scripts._pool import ScriptCall, ScriptPool

        async def main():
            pool = ScriptPool(size=2)
            await pool.start()
            code = "import time\\ndef main():\\n    time.sleep(60)\\n"
            asyncio.create_task(pool.run(ScriptCall(code=code)))
            await asyncio.sleep(0.1)
            print(*pool.pids, flush=True)
            await asyncio.sleep(60)

        asyncio.run(main())
        """
    )
    process = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        pids = [int(pid) for pid in process.stdout.readline().split()]
        assert len(pids) == 2
        assert all(alive(pid) for pid in pids)
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids):
        assert time.monotonic() < deadline, "orphaned children kept running"
        time.sleep(0.01)


async def test_huge_output_does_not_deadlock() -> None:
    code = """
    import sys
    def main():
        sys.stdout.write("x" * 5_000_000)
        for _ in range(20_000):
            print("line", file=sys.stderr)
        return "y" * 1_000_000
    """
    async with ScriptPool(size=1) as pool:
        outcome = await pool.run(script(code, timeout=60))
        assert outcome.ok
        assert len(outcome.stdout) == 5_000_000
        assert outcome.stderr.count("line\n") == 20_000
        assert len(outcome.result) == 1_000_000


async def test_output_beyond_max_output_is_cut() -> None:
    async with ScriptPool(size=1, max_output=100) as pool:
        outcome = await pool.run(script("def main():\n    print('z' * 1000)\n"))
        assert outcome.stdout.startswith("z" * 100 + "\n[tidemill: output truncated")


async def test_max_calls_per_child_recycles_children() -> None:
    async with ScriptPool(size=1, max_calls_per_child=2) as pool:
        pids = [(await pool.run(script(GETPID))).result for _ in range(5)]
        assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4]


async def test_inline_code_is_fresh_for_each_call() -> None:
    code = """
    counter = []
    def main():
        counter.append(1)
        return len(counter)
    """
    async with ScriptPool(size=1) as pool:
        results = [(await pool.run(script(code))).result for _ in range(3)]
        assert results == [1, 1, 1]


async def test_bad_calls_are_refused_before_running() -> None:
    with pytest.raises(ConfigurationError):
        ScriptCall()
    with pytest.raises(ConfigurationError):
        ScriptCall(code="def main(): pass", function="json:dumps")
    with pytest.raises(ConfigurationError):
        ScriptCall(function="json.dumps")
    with pytest.raises(ConfigurationError):
        ScriptCall(code="def main(): pass", timeout=0)
    with pytest.raises(ConfigurationError):
        ScriptPool(size=0)
    async with ScriptPool(size=1) as pool:
        with pytest.raises(SerializationError):
            await pool.run(ScriptCall(code="def main(x): pass", args={"x": object()}))
        assert (await pool.run(script(GETPID))).ok
