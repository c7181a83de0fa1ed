"""``la.data``: datasets, samplers, batchify functions, the ``DataLoader`` and image transforms
(Gluon's ``gluon.data``, with PyTorch's seeding and device placement).

>>> import numpy as np
>>> import lazyarray as la
>>> images = np.zeros((10, 3, 8, 8), np.float32)
>>> labels = np.arange(10)
>>> loader = la.data.DataLoader(la.data.ArrayDataset(images, labels), batch_size=4, last_batch="discard")
>>> [(x.shape, y.shape) for x, y in loader]
[((4, 3, 8, 8), (4,)), ((4, 3, 8, 8), (4,))]
"""
from ..errors import DataLoaderError
from . import batchify, transforms
from .dataset import ArrayDataset, Dataset, SimpleDataset
from .loader import DataLoader
from .sampler import BatchSampler, FilterSampler, IntervalSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["ArrayDataset", "BatchSampler", "DataLoader", "DataLoaderError", "Dataset", "FilterSampler",
           "IntervalSampler", "RandomSampler", "Sampler", "SequentialSampler", "SimpleDataset", "batchify",
           "transforms"]
