#!/usr/bin/env python3
"""test_budget.py can fail: a synthetic run log and test list, each rule broken once."""
import importlib.util
import sys
import tempfile
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "test_budget", Path(__file__).with_name("test_budget.py"))
budget = importlib.util.module_from_spec(spec)
spec.loader.exec_module(budget)

LOG = """Start testing: Dec 05 23:18 UTC
----------------------------------------------------------
1/4 Testing: Fast.One
1/4 Test: Fast.One
Output:
----------------------------------------------------------
Test time = 61 sec lookalike in the output is not a time
<end of output>
Test time =   3.50 sec
----------------------------------------------------------
2/4 Test: Default.TooLong
<end of output>
Test time =  61.20 sec
3/4 Test: Exhaustive.Long
<end of output>
Test time = 400.00 sec
4/4 Test: Tight.Timeout
<end of output>
Test time =  30.00 sec
End testing: Dec 05 23:25 UTC
"""

with tempfile.TemporaryDirectory() as folder:
    log = Path(folder) / "LastTest.log"
    log.write_text(LOG)
    times = budget.run_times(log)
assert times == {"Fast.One": 3.5, "Default.TooLong": 61.2, "Exhaustive.Long": 400.0,
                 "Tight.Timeout": 30.0}, times

tests = {"Fast.One": (["unit"], None), "Default.TooLong": (["unit"], None),
         "Exhaustive.Long": (["unit", "slow"], "3600"), "Tight.Timeout": (["unit"], "120")}
found = budget.problems(tests, times, 60.0, 900.0)
assert len(found) == 2, found
assert found[0].startswith("Default.TooLong: 61.2 s in the default suite"), found
assert found[1].startswith("Tight.Timeout: timeout 120 s is under 5x its 30.0 s"), found
# A slow test may take long, but its timeout still has to leave 5x.
tests["Exhaustive.Long"] = (["unit", "slow"], "1800")
assert any(f.startswith("Exhaustive.Long: timeout 1800") for f in
           budget.problems(tests, times, 60.0, 900.0))
# Within every bound: nothing to say.
assert budget.problems({"Fast.One": (["unit"], "60")}, {"Fast.One": 3.5}, 60.0, 900.0) == []
print("test_budget rules: each broken once and named")
