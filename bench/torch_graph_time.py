"""PyTorch's side of the compare_* scripts: the mean device time of one call, timed as bench_ops_gpu times minidl's
(a CUDA graph of `calls` calls replayed between two events, another replay queued just before so that the events
bracket device time rather than the host's launch)."""


def graph_time_us(torch, call, calls=20, samples=100):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up off the capture stream, as torch.cuda.graphs asks
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            call()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    total = 0.0
    for _ in range(samples):
        graph.replay()
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        total += start.elapsed_time(stop) * 1e3 / calls
    del graph
    torch.cuda.empty_cache()
    return total / samples
