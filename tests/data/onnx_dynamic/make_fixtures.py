"""Generate ONNX fixtures with DYNAMIC axes, exported by torch.onnx.export.

Not part of lazyarray (torch is NOT a dependency of the project). Run with a
side virtual environment, outside the repository:

    python3.11 -m venv /work/venv-fixtures
    /work/venv-fixtures/bin/pip install torch==2.13.0 onnx onnxruntime onnxscript numpy transformers
    HF_HUB_OFFLINE=1 /work/venv-fixtures/bin/python tests/data/onnx_dynamic/make_fixtures.py [NAME ...]

For every model it writes NAME.onnx (weights inline, no external data) and
NAME.npz with, for each case (e.g. "b2_s7"), the keys "CASE/in/INPUTNAME" and
"CASE/out/K" (torch's outputs, K = output index). Every ONNX file is checked
with onnxruntime against torch at every case (rtol 1e-3, atol 1e-4); a model
that fails with its chosen exporter is retried with the other exporter, and
dropped if that fails too. manifest.json lists the models that were kept.

Weights are random (seeded per model from its name); nothing is downloaded
(transformers models are built from small configs).
"""
from __future__ import annotations

import json
import math
import os
import sys
import traceback
import warnings
import zlib

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings("ignore")
torch.backends.mha.set_fastpath_enabled(False)  # plain ops for nn.Transformer*/MHA

HERE = os.path.dirname(os.path.abspath(__file__))
RTOL, ATOL = 1e-3, 1e-4
BATCHES = (1, 2, 3)
SEQS = (5, 7)
VOCAB, HIDDEN, HEADS, LAYERS = 100, 32, 2, 2


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def randomize_batchnorm(model: nn.Module, g: torch.Generator) -> None:
    """Give BatchNorm layers non-trivial affine params and running stats."""
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            n = m.num_features
            with torch.no_grad():
                m.weight.copy_(1 + 0.2 * torch.randn(n, generator=g))
                m.bias.copy_(0.1 * torch.randn(n, generator=g))
                m.running_mean.copy_(0.1 * torch.randn(n, generator=g))
                m.running_var.copy_(0.5 + torch.rand(n, generator=g))


# --------------------------------------------------------------------------
# Vision nets (input N,3,32,32)
# --------------------------------------------------------------------------
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + idt)


class ResNetMini(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = BasicBlock(8, 8, 1)
        self.layer2 = BasicBlock(8, 16, 2)
        self.avg = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = self.pool(self.stem(x))
        x = self.layer2(self.layer1(x))
        x = torch.flatten(self.avg(x), 1)
        return self.fc(x)


class Fire(nn.Module):
    def __init__(self, cin, sq, e1, e3):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, sq, 1)
        self.e1 = nn.Conv2d(sq, e1, 1)
        self.e3 = nn.Conv2d(sq, e3, 3, padding=1)

    def forward(self, x):
        x = F.relu(self.squeeze(x))
        return torch.cat([F.relu(self.e1(x)), F.relu(self.e3(x))], 1)


class SqueezeNetMini(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(16, 4, 8, 8), Fire(16, 4, 8, 8), nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(16, 8, 16, 16))
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(32, num_classes, 1), nn.ReLU(),
                                        nn.AdaptiveAvgPool2d((1, 1)))

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


class SE(nn.Module):
    def __init__(self, c, r=4):
        super().__init__()
        self.avg = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(c, max(c // r, 4), 1)
        self.fc2 = nn.Conv2d(max(c // r, 4), c, 1)

    def forward(self, x):
        s = self.fc2(F.relu(self.fc1(self.avg(x))))
        return x * F.hardsigmoid(s)


class InvertedResidual(nn.Module):
    def __init__(self, cin, exp, cout, k, stride, se, act):
        super().__init__()
        Act = nn.Hardswish if act == "hs" else nn.ReLU
        self.use_res = stride == 1 and cin == cout
        layers = [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), Act(),
                  nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False), nn.BatchNorm2d(exp), Act()]
        if se:
            layers.append(SE(exp))
        layers += [nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        y = self.block(x)
        return x + y if self.use_res else y


class MobileNetV3Mini(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish())
        self.blocks = nn.Sequential(
            InvertedResidual(8, 16, 8, 3, 1, True, "re"),
            InvertedResidual(8, 24, 16, 3, 2, False, "re"),
            InvertedResidual(16, 32, 16, 5, 1, True, "hs"),
        )
        self.last = nn.Sequential(nn.Conv2d(16, 32, 1, bias=False), nn.BatchNorm2d(32), nn.Hardswish())
        self.avg = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Sequential(nn.Linear(32, 32), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(32, num_classes))

    def forward(self, x):
        x = self.last(self.blocks(self.stem(x)))
        return self.head(torch.flatten(self.avg(x), 1))


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pw1 = nn.Linear(dim, 4 * dim)
        self.pw2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(0.5 * torch.ones(dim))

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)          # N,H,W,C (channels last)
        y = self.pw2(F.gelu(self.pw1(self.norm(y))))
        y = (self.gamma * y).permute(0, 3, 1, 2)
        return x + y


class ConvNeXtMini(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 4, 4)
        self.stem_norm = nn.LayerNorm(16, eps=1e-6)
        self.stage1 = nn.Sequential(ConvNeXtBlock(16), ConvNeXtBlock(16))
        self.down_norm = nn.LayerNorm(16, eps=1e-6)
        self.down = nn.Conv2d(16, 32, 2, 2)
        self.stage2 = ConvNeXtBlock(32)
        self.head_norm = nn.LayerNorm(32, eps=1e-6)
        self.head = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.stem(x)
        x = self.stem_norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        x = self.stage1(x)
        x = self.down(self.down_norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2))
        x = self.stage2(x)
        x = F.adaptive_avg_pool2d(x, 1)
        x = x.reshape(x.shape[0], -1)
        return self.head(self.head_norm(x))


class DenseLayer(nn.Module):
    def __init__(self, cin, growth):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, 2 * growth, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(2 * growth)
        self.conv2 = nn.Conv2d(2 * growth, growth, 3, padding=1, bias=False)

    def forward(self, feats):
        x = torch.cat(feats, 1)
        x = self.conv1(F.relu(self.bn1(x)))
        return self.conv2(F.relu(self.bn2(x)))


class DenseBlock(nn.Module):
    def __init__(self, n, cin, growth):
        super().__init__()
        self.layers = nn.ModuleList([DenseLayer(cin + i * growth, growth) for i in range(n)])

    def forward(self, x):
        feats = [x]
        for layer in self.layers:
            feats.append(layer(feats))
        return torch.cat(feats, 1)


class DenseNetMini(nn.Module):
    def __init__(self, num_classes=10, growth=4):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(2))
        self.block1 = DenseBlock(3, 8, growth)
        c = 8 + 3 * growth
        self.trans = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False),
                                   nn.AvgPool2d(2, 2))
        self.block2 = DenseBlock(3, c // 2, growth)
        c2 = c // 2 + 3 * growth
        self.norm = nn.BatchNorm2d(c2)
        self.fc = nn.Linear(c2, num_classes)

    def forward(self, x):
        x = self.block2(self.trans(self.block1(self.stem(x))))
        x = F.relu(self.norm(x))
        x = F.adaptive_avg_pool2d(x, (1, 1))
        return self.fc(torch.flatten(x, 1))


def channel_shuffle(x, groups: int):
    b, c, h, w = x.shape
    x = x.view(b, groups, c // groups, h, w).transpose(1, 2)
    return x.reshape(b, -1, h, w)


class ShuffleUnit(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.stride = stride
        bc = cout // 2
        if stride > 1:
            self.branch1 = nn.Sequential(
                nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False), nn.BatchNorm2d(cin),
                nn.Conv2d(cin, bc, 1, bias=False), nn.BatchNorm2d(bc), nn.ReLU())
            cin2 = cin
        else:
            self.branch1 = None
            cin2 = bc
        self.branch2 = nn.Sequential(
            nn.Conv2d(cin2, bc, 1, bias=False), nn.BatchNorm2d(bc), nn.ReLU(),
            nn.Conv2d(bc, bc, 3, stride, 1, groups=bc, bias=False), nn.BatchNorm2d(bc),
            nn.Conv2d(bc, bc, 1, bias=False), nn.BatchNorm2d(bc), nn.ReLU())

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), 1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), 1)
        return channel_shuffle(out, 2)


class ShuffleNetMini(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.units = nn.Sequential(ShuffleUnit(8, 16, 2), ShuffleUnit(16, 16, 1), ShuffleUnit(16, 32, 2),
                                   ShuffleUnit(32, 32, 1))
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.units(self.stem(x))
        return self.fc(x.mean([2, 3]))


class WindowAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)) * (C // self.heads) ** -0.5
        attn = attn.softmax(-1)
        y = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(y)


class SwinViTMini(nn.Module):
    """Patch embed, one (Swin-style) window-attention block, then a CLS token and
    one global (ViT-style) attention block."""

    def __init__(self, num_classes=10, dim=32, patch=4, window=4, heads=2):
        super().__init__()
        self.window = window
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.norm0 = nn.LayerNorm(dim)
        self.norm1 = nn.LayerNorm(dim)
        self.wattn = WindowAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.cls = nn.Parameter(0.02 * torch.randn(1, 1, dim))
        self.pos = nn.Parameter(0.02 * torch.randn(1, 1 + (32 // patch) ** 2, dim))
        self.norm3 = nn.LayerNorm(dim)
        self.gattn = WindowAttention(dim, heads)
        self.norm4 = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x)
        B, C, H, W = x.shape
        x = self.norm0(x.flatten(2).transpose(1, 2))            # B, H*W, C
        ws = self.window
        # window partition
        h = self.norm1(x).view(B, H // ws, ws, W // ws, ws, C)
        h = h.permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, C)
        h = self.wattn(h)
        # window reverse
        h = h.view(B, H // ws, W // ws, ws, ws, C).permute(0, 1, 3, 2, 4, 5).reshape(B, H * W, C)
        x = x + h
        x = x + self.mlp(self.norm2(x))
        cls = self.cls.expand(B, -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos
        x = x + self.gattn(self.norm3(x))
        return self.head(self.norm4(x[:, 0])), x


class ArangeGather(nn.Module):
    """x (N,16) float, idx (N,) int64: logits[torch.arange(N), idx] and an index_select."""

    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x, idx):
        logits = self.mlp(x)                           # N,10
        rows = torch.arange(x.shape[0])
        picked = logits[rows, idx]                     # N
        rev = torch.index_select(logits, 0, rows.flip(0))  # rows in reverse order
        return picked, rev


# --------------------------------------------------------------------------
# Own text models (no transformers)
# --------------------------------------------------------------------------
class TorchEncoder(nn.Module):
    """nn.TransformerEncoder with learned positions and a key padding mask."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.pos = nn.Embedding(64, HIDDEN)
        layer = nn.TransformerEncoderLayer(HIDDEN, HEADS, 2 * HIDDEN, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.out = nn.Linear(HIDDEN, 8)

    def forward(self, input_ids, attention_mask):
        S = input_ids.shape[1]
        pos = torch.arange(S, device=input_ids.device)
        h = self.emb(input_ids) + self.pos(pos)[None]
        h = self.enc(h, src_key_padding_mask=attention_mask == 0)
        return self.out(h)


class CausalDecoder(nn.Module):
    """GPT-like blocks; causal mask from torch.triu over the input's seq length."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, HIDDEN)
        self.pos = nn.Embedding(64, HIDDEN)
        self.layers = nn.ModuleList()
        for _ in range(LAYERS):
            self.layers.append(nn.ModuleDict(dict(
                ln1=nn.LayerNorm(HIDDEN), qkv=nn.Linear(HIDDEN, 3 * HIDDEN), proj=nn.Linear(HIDDEN, HIDDEN),
                ln2=nn.LayerNorm(HIDDEN), fc1=nn.Linear(HIDDEN, 4 * HIDDEN), fc2=nn.Linear(4 * HIDDEN, HIDDEN))))
        self.lnf = nn.LayerNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, input_ids):
        B, S = input_ids.shape
        pos = torch.arange(S, device=input_ids.device)
        h = self.emb(input_ids) + self.pos(pos)
        mask = torch.triu(torch.ones(S, S, dtype=torch.bool, device=input_ids.device), diagonal=1)
        dh = HIDDEN // HEADS
        for L in self.layers:
            q, k, v = L["qkv"](L["ln1"](h)).split(HIDDEN, dim=-1)
            q = q.reshape(B, S, HEADS, dh).transpose(1, 2)
            k = k.reshape(B, S, HEADS, dh).transpose(1, 2)
            v = v.reshape(B, S, HEADS, dh).transpose(1, 2)
            att = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
            att = att.masked_fill(mask, float("-inf")).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(B, S, HIDDEN)
            h = h + L["proj"](y)
            h = h + L["fc2"](F.gelu(L["fc1"](L["ln2"](h)), approximate="tanh"))
        return self.lm_head(self.lnf(h))


# --------------------------------------------------------------------------
# Sequence models
# --------------------------------------------------------------------------
class BiLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(32, 4)

    def forward(self, x):                              # N, T, F
        y, (h, c) = self.lstm(x)
        return self.fc(y), h


class GRUTimeMajor(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 16, num_layers=1, batch_first=False)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):                              # T, N, F
        y, h = self.gru(x)
        return self.fc(y), h


class Conv1dNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(4, 16, 3, padding=1), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(16, 16, 3, padding=2, dilation=2), nn.ReLU(), nn.AvgPool1d(2, ceil_mode=True))
        self.fc = nn.Linear(16, 5)

    def forward(self, x):                              # N, C, L
        y = self.net(x)
        return self.fc(y.amax(-1)), y


# --------------------------------------------------------------------------
# transformers models (random init from tiny configs)
# --------------------------------------------------------------------------
def _hf_common():
    return dict(attn_implementation="eager")


class HFWrap(nn.Module):
    def __init__(self, model, keys):
        super().__init__()
        self.model = model
        self.keys = keys


class BertW(HFWrap):
    def forward(self, input_ids, attention_mask):
        o = self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        return o.last_hidden_state, o.pooler_output


class DistilBertW(HFWrap):
    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True).last_hidden_state


class GPT2W(HFWrap):
    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False,
                          return_dict=True).last_hidden_state


class EncW(HFWrap):
    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True).last_hidden_state


class ViTW(HFWrap):
    def forward(self, pixel_values):
        o = self.model(pixel_values=pixel_values, return_dict=True)
        return o.last_hidden_state, o.pooler_output


def build_bert():
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                     intermediate_size=4 * HIDDEN, max_position_embeddings=64, **_hf_common())
    return BertW(BertModel(cfg), None)


def build_distilbert():
    from transformers import DistilBertConfig, DistilBertModel
    cfg = DistilBertConfig(vocab_size=VOCAB, dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS, hidden_dim=4 * HIDDEN,
                           max_position_embeddings=64, **_hf_common())
    return DistilBertW(DistilBertModel(cfg), None)


def build_gpt2():
    from transformers import GPT2Config, GPT2Model
    cfg = GPT2Config(vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_positions=64,
                     use_cache=False, **_hf_common())
    return GPT2W(GPT2Model(cfg), None)


def build_t5_encoder():
    from transformers import T5Config, T5EncoderModel
    cfg = T5Config(vocab_size=VOCAB, d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=4 * HIDDEN, num_layers=LAYERS,
                   num_heads=HEADS, relative_attention_num_buckets=8, relative_attention_max_distance=16,
                   use_cache=False, **_hf_common())
    return EncW(T5EncoderModel(cfg), None)


def build_bart_encoder():
    from transformers import BartConfig, BartModel
    cfg = BartConfig(vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=1,
                     encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=4 * HIDDEN,
                     decoder_ffn_dim=4 * HIDDEN, max_position_embeddings=64, use_cache=False, **_hf_common())
    return EncW(BartModel(cfg).get_encoder(), None)


def build_vit():
    from transformers import ViTConfig, ViTModel
    cfg = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                    num_attention_heads=HEADS, intermediate_size=4 * HIDDEN, **_hf_common())
    return ViTW(ViTModel(cfg), None)


# --------------------------------------------------------------------------
# Specs
# --------------------------------------------------------------------------
def img_inputs(b, s, g):
    return {"x": torch.randn(b, 3, 32, 32, generator=g)}


def ids_mask_inputs(b, s, g):
    ids = torch.randint(0, VOCAB, (b, s), generator=g)
    mask = torch.ones(b, s, dtype=torch.int64)
    if b > 1:
        mask[0, s - 2:] = 0   # right padding on the first sequence
    return {"input_ids": ids, "attention_mask": mask}


def ids_inputs(b, s, g):
    return {"input_ids": torch.randint(0, VOCAB, (b, s), generator=g)}


B, S, T = "batch", "seq", "time"

# name, builder, input-maker(b, s, generator), input names, output names, dynamic_axes, preferred exporter
# (the other one is tried if it fails), opset, has_seq (False / True: SEQS / tuple of lengths), time_major
SPECS = [
    # vision
    ("resnet_mini", ResNetMini, img_inputs, ["x"], ["logits"], {"x": {0: B}}, "dynamo", 18, False, False),
    ("squeezenet_mini", SqueezeNetMini, img_inputs, ["x"], ["logits"], {"x": {0: B}}, "torchscript", 17, False, False),
    ("mobilenetv3_mini", MobileNetV3Mini, img_inputs, ["x"], ["logits"], {"x": {0: B}}, "torchscript", 18, False, False),
    ("convnext_mini", ConvNeXtMini, img_inputs, ["x"], ["logits"], {"x": {0: B}}, "dynamo", 19, False, False),
    ("densenet_mini", DenseNetMini, img_inputs, ["x"], ["logits"], {"x": {0: B}}, "torchscript", 17, False, False),
    ("shufflenet_mini", ShuffleNetMini, img_inputs, ["x"], ["logits"], {"x": {0: B}}, "dynamo", 20, False, False),
    ("swin_vit_mini", SwinViTMini, img_inputs, ["x"], ["logits", "tokens"], {"x": {0: B}}, "torchscript", 18,
     False, False),
    ("arange_gather", ArangeGather,
     lambda b, s, g: {"x": torch.randn(b, 16, generator=g), "idx": torch.randint(0, 10, (b,), generator=g)},
     ["x", "idx"], ["picked", "reversed"], {"x": {0: B}, "idx": {0: B}}, "torchscript", 17, False, False),
    # own text models
    ("torch_encoder", TorchEncoder, ids_mask_inputs, ["input_ids", "attention_mask"], ["out"],
     {"input_ids": {0: B, 1: S}, "attention_mask": {0: B, 1: S}}, "torchscript", 17, True, False),
    ("causal_decoder", CausalDecoder, ids_inputs, ["input_ids"], ["logits"],
     {"input_ids": {0: B, 1: S}}, "dynamo", 18, True, False),
    # transformers models
    ("hf_bert", build_bert, ids_mask_inputs, ["input_ids", "attention_mask"], ["last_hidden_state", "pooler_output"],
     {"input_ids": {0: B, 1: S}, "attention_mask": {0: B, 1: S}}, "torchscript", 17, True, False),
    ("hf_distilbert", build_distilbert, ids_mask_inputs, ["input_ids", "attention_mask"], ["last_hidden_state"],
     {"input_ids": {0: B, 1: S}, "attention_mask": {0: B, 1: S}}, "torchscript", 18, True, False),
    ("hf_gpt2", build_gpt2, ids_mask_inputs, ["input_ids", "attention_mask"], ["last_hidden_state"],
     {"input_ids": {0: B, 1: S}, "attention_mask": {0: B, 1: S}}, "torchscript", 17, True, False),
    ("hf_t5_encoder", build_t5_encoder, ids_mask_inputs, ["input_ids", "attention_mask"], ["last_hidden_state"],
     {"input_ids": {0: B, 1: S}, "attention_mask": {0: B, 1: S}}, "torchscript", 18, True, False),
    ("hf_bart_encoder", build_bart_encoder, ids_mask_inputs, ["input_ids", "attention_mask"], ["last_hidden_state"],
     {"input_ids": {0: B, 1: S}, "attention_mask": {0: B, 1: S}}, "dynamo", 18, True, False),
    ("hf_vit", build_vit, lambda b, s, g: {"pixel_values": torch.randn(b, 3, 32, 32, generator=g)},
     ["pixel_values"], ["last_hidden_state", "pooler_output"], {"pixel_values": {0: B}}, "torchscript", 17,
     False, False),
    # sequence models
    ("lstm_bidir", BiLSTM, lambda b, s, g: {"x": torch.randn(b, s, 8, generator=g)}, ["x"], ["y", "h_n"],
     {"x": {0: B, 1: S}}, "torchscript", 17, True, False),
    # the same BiLSTM through the dynamo exporter (a different graph: Slice/Expand around two LSTM nodes)
    ("lstm_bidir_dynamo", BiLSTM, lambda b, s, g: {"x": torch.randn(b, s, 8, generator=g)}, ["x"], ["y", "h_n"],
     {"x": {0: B, 1: S}}, "dynamo", 17, True, False),
    # note: the dynamo exporter's graph for this time-major GRU fails in onnxruntime (a Reshape), hence torchscript
    ("gru_time_major", GRUTimeMajor, lambda b, s, g: {"x": torch.randn(s, b, 8, generator=g)}, ["x"], ["y", "h_n"],
     {"x": {0: T, 1: B}}, "torchscript", 18, True, True),
    # (the dynamo exporter specializes L here: torch.export fixes the length at MaxPool1d)
    ("conv1d_net", Conv1dNet, lambda b, s, g: {"x": torch.randn(b, 4, s, generator=g)}, ["x"],
     ["logits", "features"], {"x": {0: B, 2: S}}, "dynamo", 20, (16, 23), False),
]


def case_list(has_seq):
    """has_seq: False (batch cases only), True (SEQS), or a tuple of its own sequence lengths."""
    if has_seq:
        seqs = has_seq if isinstance(has_seq, tuple) else SEQS
        return [(b, s, f"b{b}_s{s}") for b in BATCHES for s in seqs]
    return [(b, None, f"b{b}") for b in BATCHES]


def out_dyn_axes(outputs, dyn, data, cases):
    """Dynamic output axes, found by comparing torch's outputs across cases: an axis
    that follows the batch (or seq/time) size gets that name, any other axis whose
    size changes gets OUTPUT_dimK."""
    # size of each named dim in each case, read from the inputs
    named = {}
    for k, axes in dyn.items():
        for ax, nm in axes.items():
            named[nm] = [data[f"{c}/in/{k}"].shape[ax] for _, _, c in cases]
    res = {}
    for j, o in enumerate(outputs):
        shapes = [data[f"{c}/out/{j}"].shape for _, _, c in cases]
        axes = {}
        for ax in range(len(shapes[0])):
            sizes = [sh[ax] for sh in shapes]
            if len(set(sizes)) == 1:
                continue
            axes[ax] = next((nm for nm, v in named.items() if v == sizes), f"{o}_dim{ax}")
        res[o] = axes
    return res


def export(model, example, inputs, outputs, dyn, odyn, exporter, opset, path):
    args = tuple(example[k] for k in inputs)
    if exporter == "torchscript":
        torch.onnx.export(model, args, path, dynamo=False, input_names=inputs, output_names=outputs,
                          dynamic_axes={**dyn, **odyn}, opset_version=opset,
                          do_constant_folding=True)
    else:
        dims = {}
        shapes = {}
        for k in inputs:
            shapes[k] = {}
            for ax, nm in dyn.get(k, {}).items():
                if nm not in dims:
                    dims[nm] = torch.export.Dim(nm, min=1, max=1024)
                shapes[k][ax] = dims[nm]
        prog = torch.onnx.export(model, args, dynamic_shapes=shapes, dynamo=True, input_names=inputs,
                                 output_names=outputs, opset_version=opset, external_data=False, optimize=True)
        prog.save(path, external_data=False)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    return m


def to_np(t):
    a = t.detach().cpu().numpy()
    return a.astype(np.float32) if a.dtype.kind == "f" else a


def flatten_out(o):
    if isinstance(o, torch.Tensor):
        return [o]
    out = []
    for x in o:
        out += flatten_out(x)
    return out


def graph_dyn_axes(m):
    res = {}
    for i in m.graph.input:
        dims = i.type.tensor_type.shape.dim
        res[i.name] = {j: d.dim_param for j, d in enumerate(dims) if d.HasField("dim_param")}
    return res


def run_one(spec, exporter):
    name, builder, mk, inputs, outputs, dyn, _exp, opset, has_seq, time_major = spec
    seed = seed_of(name)
    torch.manual_seed(seed)
    model = builder()
    randomize_batchnorm(model, torch.Generator().manual_seed(seed + 1))
    model.eval()
    g = torch.Generator().manual_seed(seed + 2)
    cases = case_list(has_seq)
    data = {}
    with torch.no_grad():
        for b, s, cname in cases:
            ins = mk(b, s, g)
            outs = flatten_out(model(*[ins[k] for k in inputs]))
            for k in inputs:
                data[f"{cname}/in/{k}"] = to_np(ins[k])
            for j, o in enumerate(outs):
                data[f"{cname}/out/{j}"] = to_np(o)
        ex_seq = (sum(has_seq) // 2 if isinstance(has_seq, tuple) else 6) if has_seq else None
        example = mk(2, ex_seq, torch.Generator().manual_seed(seed + 3))
    path = os.path.join(HERE, name + ".onnx")
    with torch.no_grad():
        odyn = out_dyn_axes(outputs, dyn, data, cases)
        m = export(model, example, inputs, outputs, dyn, odyn, exporter, opset, path)
    gin = [i.name for i in m.graph.input]
    if gin != inputs:
        raise RuntimeError(f"graph inputs {gin} != {inputs}")
    gdyn = graph_dyn_axes(m)
    for k, axes in dyn.items():
        for ax in axes:
            if ax not in gdyn[k]:
                raise RuntimeError(f"input {k} axis {ax} is not dynamic in the graph: {gdyn[k]}")
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for b, s, cname in cases:
        feed = {k: data[f"{cname}/in/{k}"] for k in inputs}
        res = sess.run(None, feed)
        n_ref = len([k for k in data if k.startswith(cname + "/out/")])
        if len(res) != n_ref:
            raise RuntimeError(f"{cname}: {len(res)} onnx outputs, torch gave {n_ref}")
        for j, r in enumerate(res):
            ref = data[f"{cname}/out/{j}"]
            if r.shape != ref.shape:
                raise RuntimeError(f"{cname} out {j}: shape {r.shape} vs torch {ref.shape}")
            np.testing.assert_allclose(r, ref, rtol=RTOL, atol=ATOL, err_msg=f"{name} {cname} out {j}")
    np.savez_compressed(os.path.join(HERE, name + ".npz"), **data)
    return {
        "name": name, "exporter": exporter, "opset": next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")),
        "inputs": inputs,
        "outputs": [o.name for o in m.graph.output],
        "dynamic_axes": {k: {str(a): n for a, n in v.items()} for k, v in dyn.items()},
        "output_dynamic_axes": {k: {str(a): n for a, n in v.items()} for k, v in odyn.items()},
        "graph_dim_params": {k: {str(a): n for a, n in v.items()} for k, v in gdyn.items()},
        "cases": [c for _, _, c in cases],
        "time_major": time_major,
    }


def main(argv):
    only = set(argv)
    manifest_path = os.path.join(HERE, "manifest.json")
    old = []
    if only and os.path.exists(manifest_path):
        old = [e for e in json.load(open(manifest_path)) if e["name"] not in only]
    entries, notes = [], []
    for spec in SPECS:
        name, exporter = spec[0], spec[6]
        if only and name not in only:
            continue
        other = "torchscript" if exporter == "dynamo" else "dynamo"
        last_err = ""
        for exp in (exporter, other):
            try:
                e = run_one(spec, exp)
                if exp != exporter:
                    e["note"] = f"{exporter} exporter failed ({last_err}); exported with {exp}"
                print(f"OK   {name:18s} {exp:11s} opset {e['opset']}", flush=True)
                entries.append(e)
                break
            except Exception as ex:  # noqa: BLE001
                msg = f"{name}: {exp} failed: {type(ex).__name__}: {str(ex).splitlines()[0][:300] if str(ex) else ''}"
                notes.append(msg)
                last_err = f"{type(ex).__name__}: {str(ex).splitlines()[0][:160] if str(ex) else ''}"
                print("FAIL", msg, flush=True)
                if os.environ.get("FIXTURE_DEBUG"):
                    traceback.print_exc()
        else:
            for ext in (".onnx", ".npz"):
                p = os.path.join(HERE, name + ext)
                if os.path.exists(p):
                    os.remove(p)
            notes.append(f"{name}: DROPPED")
    order = {s[0]: i for i, s in enumerate(SPECS)}
    allent = sorted(old + entries, key=lambda e: order.get(e["name"], 999))
    with open(manifest_path, "w") as f:
        json.dump(allent, f, indent=1)
        f.write("\n")
    print(f"{len(allent)} models in manifest")
    for n in notes:
        print("NOTE", n)


if __name__ == "__main__":
    main(sys.argv[1:])
