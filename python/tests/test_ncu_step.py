"""bench/ncu_step.py on small synthetic Nsight Compute CSVs: the last complete step is cut
at the marker kernel and summed per kernel name; bad input is an error naming the file."""

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import ncu_step  # noqa: E402

HEAD = '"ID","Process ID","Kernel Name","Block Size","gpu__time_duration.sum"\n'
UNITS = '"","","","","nsecond"\n'


def row(i, name, ns):
    return f'"{i}","7","{name}","(256, 1, 1)","{ns:,}"\n'


def synthetic(steps=3):
    """ncu's preamble, the header, the units row, then `steps` steps of 4 kernels; step s
    makes the matmul take 1000 * (s + 1) ns so the last step is told apart."""
    text = "==PROF== Connected to process 7\nsome program output\n" + HEAD + UNITS
    i = 0
    for s in range(steps):
        for name, ns in [("encoder_forward_kernel(float *, const int *)", 2000),
                         ("void layernorm_forward_vec_kernel<8>(unsigned short *, float *)", 1500),
                         ("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT", 1000 * (s + 1)),
                         ("void layernorm_forward_vec_kernel<8>(unsigned short *, float *)", 1500)]:
            text += row(i, name, ns)
            i += 1
    return text


def test_last_step_is_summed_per_kernel(tmp_path):
    p = tmp_path / "run.csv"
    p.write_text(synthetic(3))
    kernels = ncu_step.read_kernels(str(p))
    assert len(kernels) == 12 and kernels[2][1] == 1000.0
    marker, steps, step = ncu_step.last_step(kernels)
    assert marker == "encoder_forward_kernel" and steps == 2
    total, count = ncu_step.summary(step)
    # the second-to-last step (s = 1): its matmul takes 2000 ns
    assert total["nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT"] == 2000.0
    assert total["layernorm_forward_vec_kernel"] == 3000.0 and count["layernorm_forward_vec_kernel"] == 2
    assert sum(total.values()) == 2000 + 3000 + 2000


def test_gzip_and_another_marker(tmp_path, capsys):
    p = tmp_path / "run.csv.gz"
    p.write_bytes(gzip.compress(synthetic(2).encode()))
    assert ncu_step.main([str(p), "--marker", "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT"]) == 0
    out = capsys.readouterr().out
    assert "1 complete step(s)" in out and "4 kernels, 0.006 ms" in out


@pytest.mark.parametrize("text, says", [
    ("no csv here\n", "no ncu CSV header"),
    ('"ID","Kernel Name"\n"0","k"\n', "gpu__time_duration.sum"),
    (HEAD + UNITS + row(0, "encoder_forward_kernel", 5), "need two steps"),
])
def test_bad_input_exits_2_naming_the_file(tmp_path, text, says):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    r = subprocess.run([sys.executable, str(REPO / "bench" / "ncu_step.py"), str(p)],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert str(p) in r.stderr or "marker" in r.stderr
    assert says in r.stderr


def test_missing_file_exits_2(tmp_path):
    p = tmp_path / "none.csv"
    r = subprocess.run([sys.executable, str(REPO / "bench" / "ncu_step.py"), str(p)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and str(p) in r.stderr
