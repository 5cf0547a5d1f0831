"""The cost model behind benchmarks/distributed/scaling's projection.

Ring allreduce of S bytes over N machines: every link carries 2(N-1)/N of S, in 2(N-1)
messages each paying the per-message latency alpha:

    T(N) = 2(N-1)/N * S/BW + 2(N-1) * alpha

DistributedDataParallel (distributed/src/data_parallel.cpp) cuts the gradient into buckets in
reverse registration order and starts each bucket's allreduce once all its gradients arrived
and every earlier bucket started. replay_exposed() replays that with measured arrival times:
one link, so bucket allreduces run one after another; what is left after backward's compute
ends is the exposed communication. With ResNet18's two 25 MiB buckets it reduces to

    exposed = max(0, T_1 - W) + T_2

where W is the window from the first bucket's completion to the end of backward (the second
bucket holds the first layers, whose gradients come last, so nothing hides it).
"""
import math


def ring_allreduce_seconds(nbytes, n, bandwidth, alpha):
    """T(N) for one allreduce of `nbytes` (bandwidth in bytes/s, alpha in seconds)."""
    if n < 2:
        return 0.0
    return 2 * (n - 1) / n * nbytes / bandwidth + 2 * (n - 1) * alpha


def buckets(param_bytes, cap_mb):
    """Parameter indices per bucket, as DistributedDataParallel forms them (cap 0: one each)."""
    cap = cap_mb * 1024 * 1024
    out, current, size = [], [], 0.0
    for k in reversed(range(len(param_bytes))):
        current.append(k)
        size += param_bytes[k]
        if size >= cap:
            out.append(current)
            current, size = [], 0.0
    if current:
        out.append(current)
    return out


def replay_exposed(param_bytes, before_end, cap_mb, n, bandwidth, alpha):
    """Seconds of communication past the end of backward's compute.

    before_end[p]: how long before the last gradient parameter p's gradient arrived (measured).
    Times are relative to the end of backward's compute (negative: before it).
    """
    launched = link_free = -math.inf
    for bucket in buckets(param_bytes, cap_mb):
        ready = -min(before_end[p] for p in bucket)
        launched = max(launched, ready)  # buckets start in index order
        start = max(launched, link_free)
        link_free = start + ring_allreduce_seconds(sum(param_bytes[p] for p in bucket), n, bandwidth, alpha)
    return max(0.0, link_free)


def broadcast_seconds(buffers, n, alpha):
    """broadcast_buffers at each step: one small broadcast per buffer, a binomial tree of
    ceil(log2 N) latencies each (the bytes are negligible: BatchNorm statistics)."""
    return buffers * math.ceil(math.log2(n)) * alpha if n > 1 else 0.0


def latency_bound_bytes(n, bandwidth, alpha):
    """Bucket size at which a ring allreduce's latency term 2(N-1)alpha equals its bandwidth
    term 2(N-1)/N b/BW: b* = N alpha BW. Buckets below it are latency-bound; the latency share
    of a bucket of b bytes is b*/(b* + b)."""
    return n * alpha * bandwidth
