"""numbagrad.utils.data against torch.utils.data: datasets, samplers, collation, DataLoader (in-process and with
worker processes) and DistributedSampler. Where torch is the reference the test builds the same pipeline in both
and compares batches value for value."""

import collections
import importlib
import os
import random
import time
import warnings

import numpy as np
import pytest

import numbagrad
from numbagrad.utils.data import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    StackDataset,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    default_convert,
    get_worker_info,
    random_split,
)

Point = collections.namedtuple("Point", ["x", "y"])


def to_py(obj):
    """A batch (numbagrad or torch) as plain Python, with each tensor's dtype name: equal batches compare equal."""
    if hasattr(obj, "tolist") and hasattr(obj, "dtype"):
        return ("tensor", str(obj.dtype).split(".")[-1], obj.tolist())
    if isinstance(obj, dict):
        return {k: to_py(v) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return (type(obj).__name__, [to_py(v) for v in obj])
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [to_py(v) for v in obj])
    return obj


# --- datasets -----------------------------------------------------------------------------------------------------
class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i * i

    def __len__(self):
        return self.n


class Stream(IterableDataset):
    """0..n-1; with workers, each worker yields the indices i with i % num_workers == id."""

    def __init__(self, n, worker_info=get_worker_info):
        self.n, self.worker_info = n, worker_info

    def __iter__(self):
        info = self.worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.n, step))

    def __len__(self):
        return self.n


def torch_stream(torch, n):
    """``Stream`` as a torch IterableDataset (torch's DataLoader checks the base class)."""

    class TorchStream(torch.utils.data.IterableDataset):
        __iter__, __len__ = Stream.__iter__, Stream.__len__

        def __init__(self, n):
            self.n, self.worker_info = n, torch.utils.data.get_worker_info

    return TorchStream(n)


def test_tensor_dataset_gives_rows_of_each_tensor():
    x, y = numbagrad.arange(6.0).reshape(3, 2), numbagrad.tensor([7, 8, 9])
    ds = TensorDataset(x, y)
    assert len(ds) == 3
    row, label = ds[1]
    assert row.tolist() == [2.0, 3.0] and label.item() == 8


def test_tensor_dataset_rows_are_views_and_accept_negative_and_tensor_indices():
    x = numbagrad.arange(6.0).reshape(3, 2)
    y = numbagrad.tensor([7, 8, 9])
    ds = TensorDataset(x, y)
    row, label = ds[-1]
    assert row.tolist() == [4.0, 5.0] and label.shape == () and label.item() == 9
    row[0] = -1.0
    assert x[2, 0].item() == -1.0
    assert ds[numbagrad.tensor(1)][1].item() == 8
    with pytest.raises(IndexError):
        ds[3]


def test_collating_tensors_that_require_grad_keeps_the_graph():
    w = numbagrad.ones(2, requires_grad=True)
    batch = default_collate([w * 2, w * 3])
    assert type(batch.grad_fn).__name__ == "StackBackward0"
    batch.sum().backward()
    assert w.grad.tolist() == [5.0, 5.0]


def test_tensor_dataset_refuses_different_lengths():
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TensorDataset(numbagrad.ones(3), numbagrad.ones(4))


def test_subset_concat_and_add():
    sq = Squares(5)
    assert [Subset(sq, [4, 0, 2])[i] for i in range(3)] == [16, 0, 4]
    both = sq + Squares(3)
    assert type(both) is ConcatDataset and len(both) == 8
    assert [both[i] for i in range(8)] == [0, 1, 4, 9, 16, 0, 1, 4]
    assert both[-1] == 4 and both.cumulative_sizes == [5, 8]
    with pytest.raises(ValueError, match="absolute value of index should not exceed dataset length"):
        both[-9]


def test_concat_refuses_iterable_datasets():
    with pytest.raises(AssertionError, match="ConcatDataset does not support IterableDataset"):
        ConcatDataset([Stream(2)])


def test_chain_and_stack_datasets():
    chained = Stream(2) + Stream(3)
    assert type(chained) is ChainDataset and list(chained) == [0, 1, 0, 1, 2] and len(chained) == 5
    assert StackDataset(Squares(3), Squares(3))[2] == (4, 4)
    assert StackDataset(a=Squares(3), b=Subset(Squares(9), [8, 7, 6]))[0] == {"a": 0, "b": 64}
    with pytest.raises(ValueError, match="Size mismatch between datasets"):
        StackDataset(Squares(3), Squares(4))


@pytest.mark.torch
@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.7], [0.25, 0.25, 0.5], [0.33, 0.33, 0.34]])
def test_random_split_with_a_seeded_generator_is_torchs(torch, lengths):
    ours = random_split(Squares(10), lengths, generator=numbagrad.Generator().manual_seed(42))
    theirs = torch.utils.data.random_split(range(10), lengths, generator=torch.Generator().manual_seed(42))
    assert [s.indices for s in ours] == [s.indices for s in theirs]


def test_random_split_partitions_the_dataset_reproducibly():
    numbagrad.manual_seed(7)
    a = random_split(Squares(20), [5, 15])
    numbagrad.manual_seed(7)
    b = random_split(Squares(20), [5, 15])
    assert [s.indices for s in a] == [s.indices for s in b]
    assert sorted(a[0].indices + a[1].indices) == list(range(20))


def test_random_split_errors():
    with pytest.raises(ValueError, match="Sum of input lengths does not equal the length of the input dataset!"):
        random_split(Squares(5), [2, 2])
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0. This might result in an empty dataset."):
        random_split(Squares(2), [1.0, 0.0])


# --- Generator ----------------------------------------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize("seed", [0, 1, 12345, 2**32 + 3, 2**63 + 11, -5])
def test_generator_randperm_is_torchs(torch, seed):
    ours = numbagrad.Generator().manual_seed(seed)
    theirs = torch.Generator().manual_seed(seed)
    assert ours.initial_seed() == theirs.initial_seed()
    for n in (1, 2, 10, 257):
        assert ours._randperm(n) == torch.randperm(n, generator=theirs).tolist()


@pytest.mark.torch
def test_generator_randint_and_int64_draws_are_torchs(torch):
    ours, theirs = numbagrad.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    assert ours._randint(7, 40).tolist() == torch.randint(high=7, size=(40,), generator=theirs).tolist()
    assert ours._random_int64() == torch.empty((), dtype=torch.int64).random_(generator=theirs).item()


@pytest.mark.torch
def test_generator_default_seed_is_torchs(torch):
    assert numbagrad.Generator().initial_seed() == torch.Generator().initial_seed()


def test_generator_state_round_trip_replays_draws():
    g = numbagrad.Generator().manual_seed(3)
    g._randperm(5)
    state = g.get_state()
    first = g._randperm(20)
    g._randperm(20)
    g.set_state(state)
    assert g._randperm(20) == first and g.initial_seed() == 3


def test_generator_seed_range_is_torchs():
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):
        numbagrad.Generator().manual_seed(2**64)


# --- samplers -----------------------------------------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize(
    "kwargs",
    [{}, {"num_samples": 25}, {"num_samples": 4}, {"replacement": True}, {"replacement": True, "num_samples": 70}],
)
def test_random_sampler_with_a_seeded_generator_is_torchs(torch, kwargs):
    ours = RandomSampler(Squares(10), generator=numbagrad.Generator().manual_seed(1), **kwargs)
    theirs = torch.utils.data.RandomSampler(range(10), generator=torch.Generator().manual_seed(1), **kwargs)
    assert list(ours) == list(theirs) and list(ours) == list(theirs)  # two passes: the generator moves on
    assert len(ours) == len(theirs)


def test_random_sampler_without_generator_follows_manual_seed():
    sampler = RandomSampler(Squares(30))
    numbagrad.manual_seed(4)
    first, second = list(sampler), list(sampler)
    numbagrad.manual_seed(4)
    assert list(sampler) == first
    assert sorted(first) == list(range(30)) and first != second


@pytest.mark.torch
@pytest.mark.parametrize(
    ("kwargs", "error"),
    [({"replacement": 1}, TypeError), ({"num_samples": 0}, ValueError), ({"num_samples": 2.0}, ValueError)],
)
def test_random_sampler_argument_errors_are_torchs(torch, kwargs, error):
    with pytest.raises(error) as expected:
        torch.utils.data.RandomSampler(range(3), **kwargs)
    with pytest.raises(error, match="^" + str(expected.value) + "$"):
        RandomSampler(Squares(3), **kwargs)


@pytest.mark.torch
def test_subset_random_sampler_is_torchs(torch):
    indices = [10, 20, 30, 40, 50]
    ours = SubsetRandomSampler(indices, generator=numbagrad.Generator().manual_seed(8))
    theirs = torch.utils.data.SubsetRandomSampler(indices, generator=torch.Generator().manual_seed(8))
    assert list(ours) == list(theirs) and len(ours) == 5


@pytest.mark.torch
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("batch_size", [1, 3, 10, 11])
def test_batch_sampler_is_torchs(torch, batch_size, drop_last):
    ours = BatchSampler(SequentialSampler(range(10)), batch_size, drop_last)
    theirs = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(range(10)), batch_size, drop_last)
    assert list(ours) == list(theirs) and len(ours) == len(theirs)


@pytest.mark.torch
@pytest.mark.parametrize("args", [(0, False), (True, False), (2, None)])
def test_batch_sampler_argument_errors_are_torchs(torch, args):
    with pytest.raises(ValueError) as expected:
        torch.utils.data.BatchSampler(range(3), *args)
    with pytest.raises(ValueError, match="^" + str(expected.value) + "$"):
        BatchSampler(range(3), *args)


def test_weighted_random_sampler_draws_only_weighted_indices_reproducibly():
    weights = [0.0, 1.0, 0.0, 3.0]
    a = list(WeightedRandomSampler(weights, 400, generator=numbagrad.Generator().manual_seed(2)))
    b = list(WeightedRandomSampler(weights, 400, generator=numbagrad.Generator().manual_seed(2)))
    assert a == b and len(a) == 400 and set(a) == {1, 3}
    assert 0.65 < a.count(3) / 400 < 0.85  # 3/4 expected
    without = list(WeightedRandomSampler([1.0, 1.0, 1.0], 3, replacement=False))
    assert sorted(without) == [0, 1, 2]


# --- collation ----------------------------------------------------------------------------------------------------
def collate_cases(lib):
    """The same batches built with numbagrad (lib=numbagrad) or torch."""
    return {
        "ints": [1, 2, 3],
        "floats": [1.5, 2.0],
        "bools": [True, False],
        "strings": ["a", "b"],
        "bytes": [b"a", b"b"],
        "tensors": [lib.tensor([1.0, 2.0]), lib.tensor([3.0, 4.0])],
        "int_tensors": [lib.tensor(1), lib.tensor(2)],
        "np_float32": [np.ones(2, np.float32), np.zeros(2, np.float32)],
        "np_int64": [np.arange(3), np.arange(3, 6)],
        "np_scalars_f64": [np.float64(1.5), np.float64(2.5)],
        "np_scalars_i32": [np.int32(1), np.int32(2)],
        "np_bool": [np.bool_(True), np.bool_(False)],
        "dicts": [{"x": 1, "y": [1.0, 2.0]}, {"x": 2, "y": [3.0, 4.0]}],
        "ordered": [collections.OrderedDict(b=1, a=2), collections.OrderedDict(b=3, a=4)],
        "namedtuples": [Point(1, 2.0), Point(3, 4.0)],
        "tuples": [(1, "a"), (2, "b")],
        "lists": [[1, 2], [3, 4]],
        "nested": [(lib.tensor([1]), {"k": (1.0, "s")}), (lib.tensor([2]), {"k": (2.0, "t")})],
    }


@pytest.mark.torch
@pytest.mark.parametrize("case", list(collate_cases(numbagrad)))
def test_default_collate_is_torchs(torch, case):
    ours = default_collate(collate_cases(numbagrad)[case])
    theirs = torch.utils.data.default_collate(collate_cases(torch)[case])
    assert to_py(ours) == to_py(theirs)


@pytest.mark.torch
@pytest.mark.parametrize("case", ["np_float32", "np_scalars_f64", "dicts", "namedtuples", "tuples", "strings"])
def test_default_convert_is_torchs(torch, case):
    sample = collate_cases(numbagrad)[case][0]
    theirs = torch.utils.data.default_convert(collate_cases(torch)[case][0])
    assert to_py(default_convert(sample)) == to_py(theirs)


def test_collating_numpy_arrays_shares_nothing_with_the_samples():
    samples = [np.ones(2), np.zeros(2)]
    batch = default_collate(samples)
    batch[0, 0] = 5.0
    assert samples[0][0] == 1.0


@pytest.mark.torch
@pytest.mark.parametrize(
    ("batch", "error"),
    [([[1, 2], [3]], RuntimeError), ([object(), object()], TypeError), ([np.array(["a"]), np.array(["b"])], TypeError)],
)
def test_default_collate_errors_are_torchs(torch, batch, error):
    with pytest.raises(error) as expected:
        torch.utils.data.default_collate(batch)
    with pytest.raises(error) as ours:
        default_collate(batch)
    assert str(ours.value) == str(expected.value)


# --- DataLoader, one process --------------------------------------------------------------------------------------
class DictData(Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        return {"x": np.full(2, i, np.float32), "label": i % 3, "name": f"s{i}", "w": float(i) / 2}

    def __len__(self):
        return self.n


def tensor_pair(lib, n=10):
    return lib.arange(n * 2, dtype=lib.float64).reshape(n, 2), lib.arange(n) % 4


@pytest.mark.torch
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("batch_size", [1, 3, 4, 10, 16])
def test_unshuffled_batches_are_torchs(torch, batch_size, drop_last):
    ours = DataLoader(TensorDataset(*tensor_pair(numbagrad)), batch_size=batch_size, drop_last=drop_last)
    theirs = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(*tensor_pair(torch)), batch_size=batch_size, drop_last=drop_last
    )
    assert [to_py(b) for b in ours] == [to_py(b) for b in theirs]
    assert len(ours) == len(theirs)


@pytest.mark.torch
def test_unshuffled_dict_samples_are_torchs(torch):
    ours = [to_py(b) for b in DataLoader(DictData(7), batch_size=3)]
    theirs = [to_py(b) for b in torch.utils.data.DataLoader(DictData(7), batch_size=3)]
    assert ours == theirs


@pytest.mark.torch
def test_batch_size_none_converts_each_sample_like_torch(torch):
    ours = [to_py(b) for b in DataLoader(DictData(3), batch_size=None)]
    theirs = [to_py(b) for b in torch.utils.data.DataLoader(DictData(3), batch_size=None)]
    assert ours == theirs


@pytest.mark.torch
@pytest.mark.parametrize("seed", [0, 5, 99])
def test_shuffled_batches_with_a_seeded_generator_are_torchs(torch, seed):
    ours = DataLoader(
        TensorDataset(*tensor_pair(numbagrad, 23)), batch_size=5, shuffle=True,
        generator=numbagrad.Generator().manual_seed(seed),
    )  # fmt: skip
    theirs = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(*tensor_pair(torch, 23)), batch_size=5, shuffle=True,
        generator=torch.Generator().manual_seed(seed),
    )  # fmt: skip
    for _ in range(2):  # two epochs: the generator's later draws match too
        assert [to_py(b) for b in ours] == [to_py(b) for b in theirs]


def test_shuffle_follows_manual_seed_and_changes_each_epoch():
    loader = DataLoader(Squares(12), batch_size=4, shuffle=True)
    numbagrad.manual_seed(11)
    epoch1, epoch2 = [b.tolist() for b in loader], [b.tolist() for b in loader]
    numbagrad.manual_seed(11)
    assert [b.tolist() for b in loader] == epoch1
    assert epoch1 != epoch2
    assert sorted(sum(epoch1, [])) == [i * i for i in range(12)]


@pytest.mark.torch
def test_a_torch_generator_is_refused_clearly(torch):
    loader = DataLoader(Squares(4), shuffle=True, generator=torch.Generator())
    with pytest.raises(TypeError, match="generator must be a numbagrad.Generator, but got torch"):
        iter(loader)


def test_custom_sampler_batch_sampler_and_collate_fn():
    assert [b.tolist() for b in DataLoader(Squares(5), batch_size=2, sampler=[4, 3, 2, 1, 0])] == [[16, 9], [4, 1], [0]]
    assert [b.tolist() for b in DataLoader(Squares(5), batch_sampler=[[0, 4], [2]])] == [[0, 16], [4]]
    assert list(DataLoader(Squares(4), batch_size=3, collate_fn=sum)) == [5, 9]


@pytest.mark.torch
@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_workers": -1},
        {"timeout": -1},
        {"prefetch_factor": 2},
        {"persistent_workers": True},
        {"shuffle": True, "sampler": [0]},
        {"batch_sampler": [[0]], "batch_size": 2},
        {"batch_sampler": [[0]], "drop_last": True},
        {"batch_size": None, "drop_last": True},
        {"multiprocessing_context": "fork"},
        {"num_workers": 1, "multiprocessing_context": "nonsense"},
    ],
)
def test_argument_errors_are_torchs(torch, kwargs):
    with pytest.raises(ValueError) as expected:
        torch.utils.data.DataLoader(Squares(3), **kwargs)
    with pytest.raises(ValueError) as ours:
        DataLoader(Squares(3), **kwargs)
    assert str(ours.value) == str(expected.value)


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", [{"shuffle": True}, {"sampler": [0]}, {"batch_sampler": [[0]]}])
def test_iterable_dataset_argument_errors_are_torchs(torch, kwargs):
    with pytest.raises(ValueError) as expected:
        torch.utils.data.DataLoader(torch_stream(torch, 3), **kwargs)
    with pytest.raises(ValueError) as ours:
        DataLoader(Stream(3), **kwargs)
    assert str(ours.value).split(", but got")[0] == str(expected.value).split(", but got")[0]


def test_loader_attributes_are_frozen_after_init():
    loader = DataLoader(Squares(3))
    with pytest.raises(ValueError, match="batch_size attribute should not be set after DataLoader is initialized"):
        loader.batch_size = 2


@pytest.mark.torch
@pytest.mark.parametrize("drop_last", [False, True])
def test_iterable_dataset_batches_are_torchs(torch, drop_last):
    ours = DataLoader(Stream(10), batch_size=4, drop_last=drop_last)
    theirs = torch.utils.data.DataLoader(torch_stream(torch, 10), batch_size=4, drop_last=drop_last)
    assert [to_py(b) for b in ours] == [to_py(b) for b in theirs]
    assert len(ours) == len(theirs)


# --- DataLoader, worker processes ---------------------------------------------------------------------------------
class Boom(Dataset):
    def __getitem__(self, i):
        if i == 3:
            raise ValueError(f"bad sample {i}")
        return i

    def __len__(self):
        return 6


class Slow(Dataset):
    def __getitem__(self, i):
        time.sleep(5)
        return i

    def __len__(self):
        return 2


class Dies(Dataset):
    def __getitem__(self, i):
        os._exit(3)

    def __len__(self):
        return 2


class WhoLoads(Dataset):
    """Each sample records the worker that loaded it, its seed and the random draws seeded by it."""

    def __getitem__(self, i):
        info = get_worker_info()
        return {
            "id": info.id,
            "seed": info.seed,
            "num_workers": info.num_workers,
            "ng": numbagrad.rand(1).item(),
            "py": random.random(),
            "init": os.environ.get("WORKER_INIT_MARK", ""),
        }

    def __len__(self):
        return 4


def mark_worker(worker_id):
    os.environ["WORKER_INIT_MARK"] = f"init{worker_id}"


def test_workers_give_the_same_batches_in_the_same_order():
    ds = TensorDataset(*tensor_pair(numbagrad, 21))
    single = [to_py(b) for b in DataLoader(ds, batch_size=4)]
    assert [to_py(b) for b in DataLoader(ds, batch_size=4, num_workers=2)] == single
    assert [to_py(b) for b in DataLoader(ds, batch_size=4, num_workers=3, prefetch_factor=1)] == single


@pytest.mark.torch
def test_shuffled_workers_with_a_seeded_generator_are_torchs(torch):
    ours = DataLoader(Squares(17), batch_size=3, shuffle=True, num_workers=2,
                      generator=numbagrad.Generator().manual_seed(3))  # fmt: skip
    theirs = torch.utils.data.DataLoader(Squares(17), batch_size=3, shuffle=True, num_workers=2,
                                         generator=torch.Generator().manual_seed(3))  # fmt: skip
    assert [b.tolist() for b in ours] == [b.tolist() for b in theirs]


@pytest.mark.torch
def test_worker_seeds_and_info_are_torchs_rule(torch):
    batches = list(DataLoader(WhoLoads(), batch_size=1, num_workers=2, worker_init_fn=mark_worker,
                              generator=numbagrad.Generator().manual_seed(6)))  # fmt: skip
    base = torch.empty((), dtype=torch.int64).random_(generator=torch.Generator().manual_seed(6)).item()
    assert [b["id"].item() for b in batches] == [0, 1, 0, 1]  # round-robin
    assert [b["seed"].item() for b in batches] == [base, base + 1, base, base + 1]
    assert [b["num_workers"].item() for b in batches] == [2, 2, 2, 2]
    assert [b["init"] for b in batches] == [["init0"], ["init1"], ["init0"], ["init1"]]
    numbagrad.manual_seed(base)
    assert batches[0]["ng"].item() == pytest.approx(numbagrad.rand(1).item())  # worker 0 seeded with base + 0
    assert batches[0]["py"].item() != batches[1]["py"].item()
    assert get_worker_info() is None


@pytest.mark.torch
def test_iterable_dataset_with_workers_interleaves_like_torch(torch):
    ours = DataLoader(Stream(11), batch_size=2, num_workers=2)
    theirs = torch.utils.data.DataLoader(torch_stream(torch, 11), batch_size=2, num_workers=2)
    assert [b.tolist() for b in ours] == [b.tolist() for b in theirs]


def test_worker_exception_is_reraised_with_its_traceback():
    with pytest.raises(ValueError) as info:
        list(DataLoader(Boom(), batch_size=2, num_workers=2))
    msg = str(info.value)
    assert msg.startswith("Caught ValueError in DataLoader worker process 1.\nOriginal Traceback")
    assert "bad sample 3" in msg


def test_persistent_workers_serve_every_epoch_from_the_same_processes():
    loader = DataLoader(WhoLoads(), batch_size=2, num_workers=2, persistent_workers=True)
    first = [b["seed"].tolist() for b in loader]
    pids = [w.pid for w in loader._iterator._workers]
    second = [b["seed"].tolist() for b in loader]
    assert first == second and [w.pid for w in loader._iterator._workers] == pids
    it = iter(loader)
    next(it)  # an epoch left unfinished ...
    assert len([b for b in loader]) == 2  # ... does not leak its batches into the next one


@pytest.mark.torch
def test_persistent_workers_restart_iterable_datasets(torch):
    loader = DataLoader(Stream(5), batch_size=2, num_workers=2, persistent_workers=True)
    first, second = [b.tolist() for b in loader], [b.tolist() for b in loader]
    theirs = torch.utils.data.DataLoader(torch_stream(torch, 5), batch_size=2, num_workers=2)
    assert first == second == [b.tolist() for b in theirs]


def test_spawned_workers_give_the_same_batches():
    ds = TensorDataset(*tensor_pair(numbagrad, 6))
    spawned = DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context="spawn")
    assert [to_py(b) for b in spawned] == [to_py(b) for b in DataLoader(ds, batch_size=4)]


def test_timeout_is_torchs_error():
    with pytest.raises(RuntimeError, match=r"^DataLoader timed out after 0.5 seconds$"):
        next(iter(DataLoader(Slow(), num_workers=1, timeout=0.5)))


def test_a_worker_that_dies_is_reported():
    with pytest.raises(RuntimeError, match=r"^DataLoader worker \(pid\(s\) \d+\) exited unexpectedly$"):
        list(DataLoader(Dies(), num_workers=1))


def test_workers_exit_when_the_loader_is_done():
    it = iter(DataLoader(Squares(4), batch_size=2, num_workers=2))
    workers = list(it._workers)
    assert [b.tolist() for b in it] == [[0, 1], [4, 9]]
    for w in workers:
        w.join(timeout=10)
        assert not w.is_alive()


def test_pin_memory_warns_that_it_has_no_effect():
    with pytest.warns(UserWarning, match="'pin_memory' argument is set as true"):
        assert [b.tolist() for b in DataLoader(Squares(2), batch_size=2, pin_memory=True)] == [[0, 1]]


# --- DistributedSampler -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize(("n", "replicas"), [(10, 2), (10, 3), (7, 4), (2, 5), (12, 4)])
def test_distributed_shards_cover_the_dataset(n, replicas, drop_last):
    shards = [list(DistributedSampler(Squares(n), replicas, r, shuffle=False, drop_last=drop_last))
              for r in range(replicas)]  # fmt: skip
    sizes = {len(s) for s in shards}
    assert len(sizes) == 1  # every rank gets the same number of samples
    flat = sorted(sum(shards, []))
    if drop_last:
        assert len(flat) == n - n % replicas and len(set(flat)) == len(flat)
    else:
        assert set(flat) == set(range(n)) and len(flat) == -(-n // replicas) * replicas


@pytest.mark.torch
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize(("n", "replicas"), [(10, 3), (7, 4), (2, 5), (100, 8)])
def test_distributed_shards_are_torchs(torch, n, replicas, drop_last, shuffle):
    for rank in range(replicas):
        ours = DistributedSampler(Squares(n), replicas, rank, shuffle=shuffle, seed=17, drop_last=drop_last)
        theirs = torch.utils.data.DistributedSampler(range(n), replicas, rank, shuffle=shuffle, seed=17,
                                                     drop_last=drop_last)  # fmt: skip
        for epoch in range(3):
            ours.set_epoch(epoch)
            theirs.set_epoch(epoch)
            assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_distributed_shuffle_changes_with_the_epoch_only():
    sampler = DistributedSampler(Squares(20), 2, 0)
    assert list(sampler) == list(sampler)
    before = list(sampler)
    sampler.set_epoch(1)
    assert list(sampler) != before


@pytest.mark.torch
@pytest.mark.parametrize("rank", [-1, 3])
def test_distributed_invalid_rank_is_torchs_error(torch, rank):
    with pytest.raises(ValueError) as expected:
        torch.utils.data.DistributedSampler(range(4), 3, rank)
    with pytest.raises(ValueError, match="^" + str(expected.value).replace("[", r"\[").replace("]", r"\]") + "$"):
        DistributedSampler(Squares(4), 3, rank)


def test_distributed_without_the_package_is_torchs_error(monkeypatch):
    import numbagrad.distributed

    monkeypatch.setattr(numbagrad.distributed, "is_available", lambda: False)  # as without mpi4py
    with pytest.raises(RuntimeError, match="^Requires distributed package to be available$"):
        DistributedSampler(Squares(4))


def test_distributed_asks_the_process_group_for_replicas_and_rank(monkeypatch):
    import numbagrad.distributed

    monkeypatch.setattr(numbagrad.distributed, "is_available", lambda: True)
    monkeypatch.setattr(numbagrad.distributed, "get_world_size", lambda: 3)
    monkeypatch.setattr(numbagrad.distributed, "get_rank", lambda: 2)
    sampler = DistributedSampler(Squares(7), shuffle=False)
    assert (sampler.num_replicas, sampler.rank) == (3, 2)
    assert list(sampler) == [2, 5, 1]  # 0..6 padded with 0, 1; every third from 2


def test_distributed_sampler_drives_a_loader():
    loader = DataLoader(Squares(6), batch_size=2, sampler=DistributedSampler(Squares(6), 2, 1, shuffle=False))
    assert [b.tolist() for b in loader] == [[1, 9], [25]]


def test_utils_is_an_attribute_of_the_package():
    assert hasattr(numbagrad, "utils")
    assert numbagrad.utils.data.DataLoader is DataLoader
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.reload(importlib.import_module("numbagrad.utils"))
