"""numbagrad.save / numbagrad.load: round trips, shared views, weights-only refusal (torch's texts), mmap, atomic
writes, map_location, and checkpoints written by torch.save read without torch.

The cuda cases run where numbagrad.cuda.is_available(), e.g. ``NUMBA_ENABLE_CUDASIM=1 pytest -m cuda
tests/test_serialization.py``.
"""

import collections
import fractions
import io
import json
import os
import pickle
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest

import numbagrad
from numbagrad import serialization
from numbagrad.nn import Linear, Parameter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
Point = collections.namedtuple("Point", ["x", "y"])


def roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    numbagrad.save(obj, buf)
    buf.seek(0)
    return numbagrad.load(buf, **load_kwargs)


def payloads(path_or_buffer) -> list[str]:
    return [n for n in zipfile.ZipFile(path_or_buffer).namelist() if "/data/" in n]


# --- round trips --------------------------------------------------------------------------------------------------
DTYPES = [numbagrad.float32, numbagrad.float64, numbagrad.int64, numbagrad.int32, numbagrad.bool]


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_round_trip_keeps_values_dtype_and_shape(dtype):
    t = numbagrad.tensor(np.arange(-3, 9).reshape(3, 4) % 3, dtype=dtype)
    out = roundtrip(t)
    assert type(out) is numbagrad.Tensor
    assert out.dtype == dtype and out.shape == (3, 4)
    np.testing.assert_array_equal(out.numpy(), t.numpy())


def test_zero_dim_and_empty_tensors_round_trip():
    out = roundtrip([numbagrad.tensor(2.5), numbagrad.zeros(0, 3), numbagrad.ones(2, 0, dtype=numbagrad.int64)])
    assert out[0].shape == () and out[0].item() == 2.5
    assert out[1].shape == (0, 3) and out[1].dtype == numbagrad.float32
    assert out[2].shape == (2, 0) and out[2].dtype == numbagrad.int64


def test_non_contiguous_views_keep_their_strides_and_values():
    base = numbagrad.arange(24.0).reshape(4, 6)
    views = {"t": base.t(), "step": base[::2, 1::3], "flip": numbagrad.from_numpy(np.arange(5.0)[::-1])}
    out = roundtrip(views)
    for k, v in views.items():
        np.testing.assert_array_equal(out[k].numpy(), v.numpy())
        assert out[k].stride() == v.stride()


def test_views_saved_together_share_one_storage_after_load():
    x = numbagrad.arange(12.0).reshape(3, 4)
    buf = io.BytesIO()
    numbagrad.save({"x": x, "row": x[1], "cols": x[:, 1::2], "flat": x.view(-1)}, buf)
    assert len(payloads(buf)) == 1
    buf.seek(0)
    out = numbagrad.load(buf)
    out["x"][1, 1] = -7.0  # write through the base ...
    assert out["row"][1].item() == -7.0  # ... and read it through each view
    assert out["cols"][1, 0].item() == -7.0
    assert out["flat"][5].item() == -7.0
    out["cols"][2, 1] = 99.0  # and the other way round
    assert out["x"][2, 3].item() == 99.0


def test_separate_tensors_get_separate_storages():
    buf = io.BytesIO()
    numbagrad.save([numbagrad.ones(2), numbagrad.ones(2)], buf)
    assert len(payloads(buf)) == 2


def test_one_tensor_saved_twice_loads_as_one_object():
    t = numbagrad.ones(3)
    out = roundtrip({"a": t, "b": t})
    assert out["a"] is out["b"]


def test_parameter_keeps_its_type_and_requires_grad():
    p = Parameter(numbagrad.tensor([1.0, 2.0]))
    frozen = Parameter(numbagrad.tensor([3.0]), requires_grad=False)
    out = roundtrip([p, frozen])
    assert type(out[0]) is Parameter and out[0].requires_grad and out[0].is_leaf
    assert type(out[1]) is Parameter and not out[1].requires_grad
    np.testing.assert_array_equal(out[0].detach().numpy(), [1.0, 2.0])


def test_requires_grad_tensor_loads_as_a_leaf_that_requires_grad():
    x = numbagrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2  # a non-leaf is saved as its data, requiring grad, as torch does
    out = roundtrip([x, y])
    assert out[0].requires_grad and out[0].is_leaf
    assert out[1].requires_grad and out[1].is_leaf
    np.testing.assert_array_equal(out[1].detach().numpy(), [2.0, 4.0])


def test_tensor_attributes_are_kept():
    t = numbagrad.ones(2)
    t.note = "calibrated"
    assert roundtrip(t).note == "calibrated"


def test_nested_containers_and_plain_values_round_trip():
    obj = {
        "list": [1, 2.5, None, True, "s", b"bytes", 1 + 2j],
        "tuple": (numbagrad.ones(1), ("nested", [numbagrad.zeros(2)])),
        "set": {1, 2, 3},
        "frozenset": frozenset({"a"}),
        "ordered": collections.OrderedDict(b=1, a=2),
        "counter": collections.Counter("aab"),
        "dtype": numbagrad.float64,
        "device": numbagrad.device("cpu"),
        "size": numbagrad.Size([2, 3]),
        "bytearray": bytearray(b"xy"),
    }
    out = roundtrip(obj)
    assert out["list"] == obj["list"]
    assert out["tuple"][1][0] == "nested" and out["tuple"][1][1][0].shape == (2,)
    assert out["set"] == {1, 2, 3} and out["frozenset"] == frozenset({"a"})
    assert type(out["ordered"]) is collections.OrderedDict and list(out["ordered"]) == ["b", "a"]
    assert out["counter"] == collections.Counter("aab")
    assert out["dtype"] is numbagrad.float64
    assert out["device"] == numbagrad.device("cpu")
    assert type(out["size"]) is numbagrad.Size and out["size"] == (2, 3)
    assert out["bytearray"] == bytearray(b"xy")


def test_state_dict_loads_into_a_new_linear():
    numbagrad.manual_seed(1)
    src = Linear(4, 3)
    out = roundtrip(src.state_dict())
    assert type(out) is collections.OrderedDict and list(out) == ["weight", "bias"]
    numbagrad.manual_seed(2)
    dst = Linear(4, 3)
    dst.load_state_dict(out)
    x = numbagrad.randn(5, 4)
    np.testing.assert_array_equal(dst(x).detach().numpy(), src(x).detach().numpy())


def test_optimizer_state_dict_round_trip_continues_training_identically():
    def make():
        numbagrad.manual_seed(3)
        model = Linear(3, 2).double()
        return model, numbagrad.optim.Adam(model.parameters(), lr=0.1)

    def step(model, opt, x):
        opt.zero_grad()
        (model(x) ** 2).sum().backward()
        opt.step()

    x = numbagrad.randn(4, 3, dtype=numbagrad.float64)
    model, opt = make()
    for _ in range(3):
        step(model, opt, x)
    saved = roundtrip({"model": model.state_dict(), "opt": opt.state_dict()})
    model2, opt2 = make()
    model2.load_state_dict(saved["model"])
    opt2.load_state_dict(saved["opt"])
    step(model, opt, x)
    step(model2, opt2, x)
    np.testing.assert_array_equal(model2.weight.detach().numpy(), model.weight.detach().numpy())
    assert saved["opt"]["param_groups"][0]["betas"] == (0.9, 0.999)


def test_save_to_a_path_and_load_from_a_path_or_pathlike(tmp_path):
    path = tmp_path / "t.pt"
    numbagrad.save({"w": numbagrad.ones(2)}, path)
    np.testing.assert_array_equal(numbagrad.load(path)["w"].numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(numbagrad.load(str(path))["w"].numpy(), [1.0, 1.0])
    with open(path, "rb") as f:
        np.testing.assert_array_equal(numbagrad.load(f)["w"].numpy(), [1.0, 1.0])


def test_equal_objects_give_identical_files():
    a, b = io.BytesIO(), io.BytesIO()
    numbagrad.save({"w": numbagrad.arange(5.0)}, a)
    numbagrad.save({"w": numbagrad.arange(5.0)}, b)
    assert a.getvalue() == b.getvalue()


def test_payloads_are_npy_files_with_64_byte_aligned_data(tmp_path):
    path = tmp_path / "t.pt"
    numbagrad.save([numbagrad.arange(7.0), numbagrad.arange(3, dtype=numbagrad.int32)], path)
    with zipfile.ZipFile(path) as zf, open(path, "rb") as raw:
        for name in payloads(path):
            info = zf.getinfo(name)
            assert info.compress_type == zipfile.ZIP_STORED
            np.load(io.BytesIO(zf.read(name)))  # a plain .npy
            raw.seek(info.header_offset + 26)
            name_len, extra_len = np.frombuffer(raw.read(4), "<u2")
            data_start = info.header_offset + 30 + int(name_len) + int(extra_len)
            assert data_start % 64 == 0


# --- weights_only -------------------------------------------------------------------------------------------------
class Custom:
    def __init__(self, value):
        self.value = value


def test_weights_only_refuses_an_unknown_class_with_torchs_message():
    with pytest.raises(pickle.UnpicklingError) as info:
        roundtrip({"x": Custom(1)})
    msg = str(info.value)
    assert msg.startswith("Weights only load failed. This file can still be loaded, to do so you have two options")
    assert (
        "WeightsUnpickler error: Unsupported global: GLOBAL test_serialization.Custom was not an allowed global by "
        "default. Please use `torch.serialization.add_safe_globals([test_serialization.Custom])`"
    ) in msg


def test_weights_only_refuses_functions_of_blocked_modules():
    with pytest.raises(pickle.UnpicklingError, match="Trying to load unsupported GLOBAL posix.system whose module "):
        roundtrip({"f": os.system})


def test_weights_only_false_loads_any_picklable_object():
    out = roundtrip({"x": Custom(5), "frac": fractions.Fraction(1, 3)}, weights_only=False)
    assert isinstance(out["x"], Custom) and out["x"].value == 5
    assert out["frac"] == fractions.Fraction(1, 3)


def test_add_safe_globals_allows_a_class():
    try:
        serialization.add_safe_globals([Custom])
        assert roundtrip(Custom(7)).value == 7
        assert Custom in serialization.get_safe_globals()
    finally:
        serialization.clear_safe_globals()
    with pytest.raises(pickle.UnpicklingError):
        roundtrip(Custom(7))


def test_safe_globals_context_manager_allows_only_inside():
    with serialization.safe_globals([fractions.Fraction]):
        assert roundtrip(fractions.Fraction(2, 5)) == fractions.Fraction(2, 5)
    with pytest.raises(pickle.UnpicklingError):
        roundtrip(fractions.Fraction(2, 5))


def test_a_whole_module_needs_weights_only_false():
    numbagrad.manual_seed(5)
    model = numbagrad.nn.Sequential(Linear(2, 3), numbagrad.nn.Tanh())
    buf = io.BytesIO()
    numbagrad.save(model, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL numbagrad.nn.containers.Sequential was not an allowed"):
        numbagrad.load(buf)
    buf.seek(0)
    loaded = numbagrad.load(buf, weights_only=False)
    x = numbagrad.randn(4, 2)
    np.testing.assert_array_equal(loaded(x).detach().numpy(), model(x).detach().numpy())
    assert type(loaded[0].weight) is Parameter and loaded[0].weight.requires_grad


def test_pickle_module_with_weights_only_is_refused():
    with pytest.raises(RuntimeError, match="Can not safely load weights when explicit pickle_module is specified"):
        numbagrad.load(io.BytesIO(), pickle_module=pickle, weights_only=True)


def test_pickle_module_alone_means_a_full_unpickle():
    buf = io.BytesIO()
    numbagrad.save(Custom(3), buf)
    buf.seek(0)
    assert numbagrad.load(buf, pickle_module=pickle).value == 3


def test_a_file_that_is_not_a_zip_checkpoint_is_refused():
    with pytest.raises(RuntimeError, match="numbagrad.load reads zip checkpoints"):
        numbagrad.load(io.BytesIO(pickle.dumps({"a": 1})))


# --- mmap ---------------------------------------------------------------------------------------------------------
def _memory_owner(t):
    a = t._data
    while isinstance(a.base, np.ndarray) and not isinstance(a, np.memmap):
        a = a.base
    return a


def test_mmap_maps_payloads_instead_of_reading_them(tmp_path):
    path = tmp_path / "m.pt"
    x = numbagrad.arange(10.0)
    numbagrad.save({"x": x, "tail": x[5:]}, path)
    out = numbagrad.load(path, mmap=True)
    assert isinstance(_memory_owner(out["x"]), np.memmap)
    assert out["x"]._data.flags.aligned
    np.testing.assert_array_equal(out["tail"].numpy(), np.arange(5.0, 10.0, dtype=np.float32))
    out["x"][6] = -1.0  # copy-on-write: views still share, the file is unchanged
    assert out["tail"][1].item() == -1.0
    assert numbagrad.load(path)["x"][6].item() == 6.0


def test_mmap_needs_a_path():
    with pytest.raises(ValueError, match="f must be a file path in order to use the mmap argument"):
        numbagrad.load(io.BytesIO(), mmap=True)


# --- atomic writes ------------------------------------------------------------------------------------------------
def test_failed_pickling_leaves_the_previous_file_intact(tmp_path):
    path = tmp_path / "ckpt.pt"
    numbagrad.save({"w": numbagrad.ones(3)}, path)
    before = path.read_bytes()
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        numbagrad.save({"w": numbagrad.zeros(3), "bad": lambda: 0}, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.pt"]  # no temporary file left behind


def test_failure_while_writing_payloads_leaves_the_previous_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    numbagrad.save({"w": numbagrad.ones(3)}, path)
    before = path.read_bytes()
    calls = []
    real = serialization._write_record

    def failing(zf, fh, name, chunks):
        calls.append(name)
        if name.endswith(".npy"):
            raise OSError("No space left on device")
        real(zf, fh, name, chunks)

    monkeypatch.setattr(serialization, "_write_record", failing)
    with pytest.raises(OSError, match="No space left"):
        numbagrad.save({"w": numbagrad.zeros(3)}, path)
    assert any(n.endswith(".npy") for n in calls)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.pt"]


def test_overwriting_keeps_the_file_mode(tmp_path):
    path = tmp_path / "ckpt.pt"
    numbagrad.save(numbagrad.ones(1), path)
    os.chmod(path, 0o640)
    numbagrad.save(numbagrad.zeros(1), path)
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert numbagrad.load(path).item() == 0.0


def test_missing_parent_directory_is_torchs_error(tmp_path):
    with pytest.raises(RuntimeError, match="Parent directory .*nope does not exist."):
        numbagrad.save(numbagrad.ones(1), tmp_path / "nope" / "x.pt")


# --- map_location -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("location", ["cpu", numbagrad.device("cpu"), {"cpu": "cpu"}])
def test_map_location_to_cpu(location):
    out = roundtrip({"w": numbagrad.ones(2)}, map_location=location)
    assert out["w"].device == numbagrad.device("cpu")


def test_map_location_callable_gets_each_storage_and_its_location():
    seen = []

    def fn(storage, location):
        seen.append((location, storage.shape))
        return None  # None: restore as saved

    x = numbagrad.arange(6.0)
    out = roundtrip([x, x[2:], numbagrad.ones(1)], map_location=fn)
    assert seen == [("cpu", (6,)), ("cpu", (1,))]
    assert out[1][0].item() == 2.0


def test_map_location_callable_may_return_the_storage():
    out = roundtrip(numbagrad.arange(3.0), map_location=lambda storage, loc: storage)
    np.testing.assert_array_equal(out.numpy(), [0.0, 1.0, 2.0])


def test_map_location_of_unknown_type_is_refused():
    with pytest.raises(ValueError, match="Unsupported map_location type"):
        roundtrip(numbagrad.ones(1), map_location=3)


def test_unknown_location_is_torchs_error():
    with pytest.raises(RuntimeError, match=r"don't know how to restore data location of .* \(tagged with mps\)"):
        roundtrip(numbagrad.ones(1), map_location="mps")


@pytest.mark.skipif(numbagrad.cuda.is_available(), reason="checks the message shown when CUDA is missing")
def test_map_location_cuda_without_cuda_is_torchs_error():
    with pytest.raises(RuntimeError, match=r"^Attempting to deserialize object on a CUDA device but torch.cuda"):
        roundtrip(numbagrad.ones(1), map_location="cuda")


@pytest.mark.cuda
@pytest.mark.skipif(not numbagrad.cuda.is_available(), reason="needs CUDA or NUMBA_ENABLE_CUDASIM=1")
def test_cuda_tensors_save_to_host_and_load_back_to_cuda():
    x = numbagrad.arange(6.0).reshape(2, 3).cuda()
    out = roundtrip({"x": x, "t": x.t()})
    assert out["x"].device.type == "cuda" and out["t"].device.type == "cuda"
    np.testing.assert_array_equal(out["t"].cpu().numpy(), np.arange(6.0, dtype=np.float32).reshape(2, 3).T)
    cpu = roundtrip({"x": x}, map_location="cpu")["x"]
    assert cpu.device.type == "cpu"
    moved = roundtrip({"x": numbagrad.ones(2)}, map_location={"cpu": "cuda:0"})["x"]
    assert moved.device.type == "cuda"


# --- checkpoints written by torch.save, read without torch ------------------------------------------------------
LOADER = textwrap.dedent(
    """
    import json, sys
    sys.modules["torch"] = None  # torch cannot be imported in this process
    import numpy as np
    import numbagrad

    results = {}
    for name in sys.argv[3:]:
        path = f"{sys.argv[1]}/{name}.pt"
        try:
            obj = numbagrad.load(path, mmap=name.startswith("mmap"))
        except Exception as e:
            results[name] = {"error": [type(e).__name__, str(e)]}
            continue
        results[name] = {"ok": True}
        numbagrad.save(obj, f"{sys.argv[1]}/{name}.ng", pickle_protocol=4)
        if name == "views":
            obj["x"][1, 0] = -5.0
            results[name]["view_after_write"] = obj["v"].tolist()
        if name.startswith("mmap"):
            a = obj["x"]._data
            while isinstance(a.base, np.ndarray) and not isinstance(a, np.memmap):
                a = a.base
            results[name]["memmap"] = isinstance(a, np.memmap)
    json.dump(results, open(sys.argv[2], "w"))
    """
)
EXTRA_DTYPES = ["float16", "int8", "int16", "uint8"]


@pytest.fixture(scope="module")
def from_torch(tmp_path_factory):
    """Checkpoints written by torch.save, loaded by numbagrad in a process where ``import torch`` fails."""
    torch = pytest.importorskip("torch")
    d = tmp_path_factory.mktemp("torch_ckpt")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x = torch.randn(5, 3, dtype=torch.float64)
    for _ in range(2):
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        opt.step()
    base = torch.arange(12.0).reshape(3, 4)
    saved = {
        "dtypes": {
            str(dt).split(".")[1]: (torch.arange(-2, 4) % 3).to(dt)
            for dt in (torch.float32, torch.float64, torch.int64, torch.int32, torch.bool)
        },
        "views": {"x": base, "v": base[1:, ::2], "t": base.t()},
        "param": {
            "p": torch.nn.Parameter(torch.tensor([1.0, 2.0])),
            "frozen": torch.nn.Parameter(torch.tensor([3.0]), requires_grad=False),
            "rg": torch.ones(2, requires_grad=True),
        },
        "model": {"state": model.state_dict(), "opt": opt.state_dict(), "x": x},
        "misc": {
            "dtype": torch.float64,
            "device": torch.device("cpu"),
            "size": torch.Size([2, 3]),
            "scalar": torch.tensor(3.5),
            "empty": torch.zeros(0, 2),
            "bytes": b"ab",
            "set": {1, 2},
        },
        "mmap": {"x": torch.arange(8, dtype=torch.float64)},
        "bfloat16": {"w": torch.ones(2, dtype=torch.bfloat16)},
        "uint16": {"w": torch.ones(2, dtype=torch.uint16)},
        "unsafe": {"f": fractions.Fraction(1, 2)},
    }
    tagged = torch.ones(2)
    tagged.note = "calibrated"  # torch records a tensor with attributes through _rebuild_from_type_v2
    saved["misc"]["tagged"] = tagged
    for dt in EXTRA_DTYPES:
        saved[dt] = {"w": torch.tensor([0, 1, 2, 100], dtype=getattr(torch, dt))}
    for name, obj in saved.items():
        torch.save(obj, d / f"{name}.pt")
    out = d / "results.json"
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "src")}
    subprocess.run([sys.executable, "-c", LOADER, str(d), str(out), *saved], check=True, env=env, timeout=120)
    results = json.loads(out.read_text())

    def loaded(name):
        assert results[name].get("ok"), results[name]
        return numbagrad.load(d / f"{name}.ng")

    return {"torch": torch, "saved": saved, "results": results, "loaded": loaded, "model": model, "opt": opt}


@pytest.mark.torch
def test_torch_checkpoint_values_and_dtypes(from_torch):
    out = from_torch["loaded"]("dtypes")
    for name, t in from_torch["saved"]["dtypes"].items():
        assert out[name].dtype == getattr(numbagrad, name)
        np.testing.assert_array_equal(out[name].numpy(), t.numpy())


@pytest.mark.torch
def test_torch_checkpoint_views_share_storage_after_load(from_torch):
    res = from_torch["results"]["views"]
    assert res["view_after_write"] == [[-5.0, 6.0], [8.0, 10.0]]
    out = from_torch["loaded"]("views")
    np.testing.assert_array_equal(out["t"].numpy(), from_torch["saved"]["views"]["t"].numpy())
    assert out["t"].stride() == (1, 4)


@pytest.mark.torch
def test_torch_checkpoint_parameters_and_requires_grad(from_torch):
    out = from_torch["loaded"]("param")
    assert type(out["p"]) is Parameter and out["p"].requires_grad
    assert type(out["frozen"]) is Parameter and not out["frozen"].requires_grad
    assert type(out["rg"]) is numbagrad.Tensor and out["rg"].requires_grad


@pytest.mark.torch
def test_torch_state_dict_drives_a_numbagrad_model_to_torchs_output(from_torch):
    torch = from_torch["torch"]
    out = from_torch["loaded"]("model")
    model = numbagrad.nn.Sequential(Linear(3, 4), numbagrad.nn.Tanh(), Linear(4, 2)).double()
    model.load_state_dict(out["state"])
    x = out["x"]
    with torch.no_grad():
        expected = from_torch["model"](from_torch["saved"]["model"]["x"]).numpy()
    np.testing.assert_allclose(model(x).detach().numpy(), expected, rtol=1e-12, atol=0)


@pytest.mark.torch
def test_torch_adam_state_continues_in_numbagrad_like_torch(from_torch):
    torch = from_torch["torch"]
    out = from_torch["loaded"]("model")
    assert set(out["opt"]["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}
    model = numbagrad.nn.Sequential(Linear(3, 4), numbagrad.nn.Tanh(), Linear(4, 2)).double()
    model.load_state_dict(out["state"])
    opt = numbagrad.optim.Adam(model.parameters(), lr=0.01)
    opt.load_state_dict(out["opt"])
    (model(out["x"]) ** 2).sum().backward()
    opt.step()
    tmodel, topt = from_torch["model"], from_torch["opt"]
    topt.zero_grad()
    tmodel(from_torch["saved"]["model"]["x"]).pow(2).sum().backward()
    topt.step()
    for p, q in zip(model.parameters(), tmodel.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-10, atol=1e-12)
    del torch


@pytest.mark.torch
def test_torch_checkpoint_plain_values(from_torch):
    out = from_torch["loaded"]("misc")
    assert out["dtype"] is numbagrad.float64
    assert out["device"] == numbagrad.device("cpu")
    assert type(out["size"]) is numbagrad.Size and out["size"] == (2, 3)
    assert out["scalar"].shape == () and out["scalar"].item() == 3.5
    assert out["empty"].shape == (0, 2)
    assert out["bytes"] == b"ab" and out["set"] == {1, 2}
    assert type(out["tagged"]) is numbagrad.Tensor and out["tagged"].note == "calibrated"


@pytest.mark.torch
def test_torch_checkpoint_with_mmap_is_mapped(from_torch):
    assert from_torch["results"]["mmap"]["memmap"]
    np.testing.assert_array_equal(from_torch["loaded"]("mmap")["x"].numpy(), np.arange(8.0))


@pytest.mark.torch
def test_torch_bfloat16_checkpoint_loads_without_torch(from_torch):
    out = from_torch["loaded"]("bfloat16")
    assert out["w"].dtype == numbagrad.bfloat16 and out["w"].float().tolist() == [1.0, 1.0]


@pytest.mark.torch
@pytest.mark.parametrize("name", ["uint16"])
def test_torch_dtypes_numbagrad_cannot_store_get_a_clear_error(from_torch, name):
    kind, msg = from_torch["results"][name]["error"]
    assert kind == "RuntimeError"
    assert msg.startswith(f"numbagrad.load: the checkpoint holds a tensor of dtype torch.{name}, which numbagrad ")


@pytest.mark.torch
@pytest.mark.parametrize("name", EXTRA_DTYPES)
def test_torch_narrow_dtypes_load_where_numbagrad_has_them(from_torch, name):
    """float16/int8/int16/uint8 load as such once numbagrad has the dtype, and are refused clearly before."""
    res = from_torch["results"][name]
    if hasattr(numbagrad, name):
        out = from_torch["loaded"](name)
        assert out["w"].dtype == getattr(numbagrad, name)
        np.testing.assert_array_equal(out["w"].numpy(), [0, 1, 2, 100])
    else:
        assert res["error"][0] == "RuntimeError" and f"torch.{name}, which numbagrad cannot store" in res["error"][1]


@pytest.mark.torch
def test_torch_checkpoint_with_an_unknown_global_fails_with_torchs_message(from_torch, tmp_path):
    torch = from_torch["torch"]
    kind, msg = from_torch["results"]["unsafe"]["error"]
    path = tmp_path / "unsafe.pt"
    torch.save(from_torch["saved"]["unsafe"], path)
    with pytest.raises(pickle.UnpicklingError) as expected:
        torch.load(path)
    assert kind == "UnpicklingError" and msg == str(expected.value)


# --- safetensors ------------------------------------------------------------------------------------------------
ALL_STORED = {
    "f32": numbagrad.arange(6.0).reshape(2, 3).t(),  # non-contiguous: written in row-major order
    "f64": numbagrad.tensor([0.5, -1e300], dtype=numbagrad.float64),
    "f16": numbagrad.tensor([1.5, -65504.0, 6e-8], dtype=numbagrad.float16),
    "bf16": numbagrad.tensor([[1.0, -3.140625], [1e38, 2.0**-130]], dtype=numbagrad.bfloat16),
    "i64": numbagrad.tensor([-(2**62), 7]),
    "i32": numbagrad.tensor([1, 2, 3], dtype=numbagrad.int32),
    "i16": numbagrad.tensor([-32768, 32767], dtype=numbagrad.int16),
    "i8": numbagrad.tensor([-128, 5, 127], dtype=numbagrad.int8),
    "u8": numbagrad.tensor([0, 200, 255], dtype=numbagrad.uint8),
    "b": numbagrad.tensor([True, False, True]),
    "scalar": numbagrad.tensor(2.5),
    "empty": numbagrad.zeros(0, 3),
}


def _same(a, b):
    """Same dtype, shape and values (bfloat16 compared through float32, which holds it exactly)."""
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    if a.dtype == numbagrad.bfloat16:
        a, b = a.float(), b.float()
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def _safetensors_header(path):
    import json
    import struct

    raw = open(path, "rb").read()
    (length,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + length]), length, raw[8 + length :]


def test_safetensors_round_trip_keeps_every_dtype(tmp_path):
    path = tmp_path / "w.safetensors"
    numbagrad.save_file(ALL_STORED, path, metadata={"format": "pt"})
    out = numbagrad.load_file(path)
    assert set(out) == set(ALL_STORED)
    for k, t in ALL_STORED.items():
        _same(out[k], t)
    out["f32"][0, 0] = 9.0  # loaded tensors are writable
    assert out["f32"][0, 0].item() == 9.0


def test_safetensors_header_names_dtypes_by_the_format_codes(tmp_path):
    path = tmp_path / "w.safetensors"
    numbagrad.save_file(ALL_STORED, path, metadata={"format": "pt"})
    header, length, _ = _safetensors_header(path)
    codes = {k: v["dtype"] for k, v in header.items() if k != "__metadata__"}
    assert codes == {"f32": "F32", "f64": "F64", "f16": "F16", "bf16": "BF16", "i64": "I64", "i32": "I32",
                     "i16": "I16", "i8": "I8", "u8": "U8", "b": "BOOL", "scalar": "F32", "empty": "F32"}  # fmt: skip
    assert header["__metadata__"] == {"format": "pt"} and length % 8 == 0
    assert header["bf16"]["shape"] == [2, 2] and header["scalar"]["shape"] == []


def test_safetensors_bytes_are_little_endian_row_major(tmp_path):
    path = tmp_path / "w.safetensors"
    numbagrad.save_file({"a": numbagrad.tensor([[1.0, 2.0]], dtype=numbagrad.bfloat16),
                         "b": numbagrad.tensor([258], dtype=numbagrad.int16).expand(2)}, path)  # fmt: skip
    header, _, data = _safetensors_header(path)
    assert header["a"]["data_offsets"] == [0, 4] and header["b"]["data_offsets"] == [4, 8]
    assert data == bytes([0x80, 0x3F, 0x00, 0x40, 0x02, 0x01, 0x02, 0x01])  # bf16 1.0 = 0x3F80, 2.0 = 0x4000


def test_save_file_refuses_values_that_are_not_tensors(tmp_path):
    with pytest.raises(ValueError, match="Key `x` is invalid, expected numbagrad.Tensor"):
        numbagrad.save_file({"x": [1.0]}, tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match="argument 'metadata': 'int' object is not an instance of 'str'"):
        numbagrad.save_file({"x": numbagrad.ones(1)}, tmp_path / "x.safetensors", metadata={"n": 1})
    assert not (tmp_path / "x.safetensors").exists()


def _write_raw(path, header: dict, data: bytes):
    import json
    import struct

    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def test_load_file_names_a_dtype_numbagrad_cannot_store(tmp_path):
    path = tmp_path / "u16.safetensors"
    _write_raw(path, {"w": {"dtype": "U16", "shape": [1], "data_offsets": [0, 2]}}, b"\x01\x00")
    with pytest.raises(RuntimeError, match="dtype torch.uint16, which numbagrad cannot store"):
        numbagrad.load_file(path)


@pytest.mark.parametrize(
    ("header", "data", "what"),
    [
        ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4, "MetadataIncompleteBuffer"),
        ({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, r"TensorInvalidInfo\(w\)"),
        ({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8, r"InvalidOffset\(w\)"),
        ({"w": {"dtype": "X9", "shape": [1], "data_offsets": [0, 1]}}, b"\0", "InvalidHeaderDeserialization"),
        ([], b"", "InvalidHeaderDeserialization"),
    ],
)
def test_load_file_rejects_malformed_files(tmp_path, header, data, what):
    path = tmp_path / "bad.safetensors"
    _write_raw(path, header, data)
    with pytest.raises(RuntimeError, match="^Error while deserializing header: " + what):
        numbagrad.load_file(path)


def test_load_file_rejects_a_file_of_another_kind(tmp_path):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(b"PK\x03\x04 not a safetensors file")
    with pytest.raises(RuntimeError, match="^Error while deserializing header: HeaderTooLarge"):
        numbagrad.load_file(path)


def test_load_dispatches_safetensors_paths_like_torch(tmp_path):
    path = tmp_path / "w.safetensors"
    numbagrad.save_file({"w": numbagrad.ones(2)}, path)
    np.testing.assert_array_equal(numbagrad.load(path, map_location="cpu")["w"].numpy(), [1.0, 1.0])
    with pytest.raises(RuntimeError, match="^Loading safetensors file with dict map_location is not supported."):
        numbagrad.load(path, map_location={"cpu": "cpu"})


@pytest.mark.torch
def test_safetensors_files_are_shared_with_the_safetensors_package(tmp_path):
    """Files written here load in ``safetensors.torch`` with torch's values and dtypes, and the reverse
    (half precision included); skipped where the optional safetensors package is not installed."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    def to_torch(t):
        if t.dtype == numbagrad.bfloat16:
            return torch.from_numpy(t.float().numpy()).bfloat16()
        return torch.from_numpy(t.numpy().copy())

    ours, theirs = tmp_path / "ours.safetensors", tmp_path / "theirs.safetensors"
    numbagrad.save_file(ALL_STORED, ours, metadata={"format": "pt"})
    read = load_file(ours)
    for k, t in ALL_STORED.items():
        assert torch.equal(read[k], to_torch(t)), k
    with safe_open(ours, framework="pt") as f:
        assert f.metadata() == {"format": "pt"}
    save_file({k: to_torch(t) for k, t in ALL_STORED.items()}, theirs, metadata={"format": "pt"})
    out = numbagrad.load_file(theirs)
    for k, t in ALL_STORED.items():
        _same(out[k], t)
    assert ours.read_bytes() == theirs.read_bytes()  # the same layout, byte for byte
