"""The speed and memory benchmark: `python3 dev.py bench` (or `python -m bench` inside .venv).

One module per area, each with `run(report)`; every target is in bench/targets.py. The areas, in the order
they run:

    model     the model core: full trace vs plain forward, Trainer.step and PairTrainer.step vs plain loops,
              the roses preset to loss 0.05, the full trace at SmolLM2's shape, a new token with the KV cache
    pages     every page's server-side script run (AppTest), the temperature slider, the encoder-decoder page
    lab       the training lab's ticks vs a plain loop, roses with the lab's defaults, the sort run
    load      a real server and Chromium: cold start, typing latency with 10 visitors (2 of them training);
              the server-side cost of an update while trainings tick
    memory    a real server's memory: first visitor, 10 idle, 10 exploring, 2 training
    browser   charts the browser builds per update, Chromium's CPU on a training tab
    gpt2      GPT-2 small's shape from a disk cache: trace, load, pages, server memory, cold start
    smollm2   SmolLM2-135M's shape from a disk cache: pages, server memory alone and beside GPT-2's visitors
    classroom a live class of 60 students on one server (AppTest): following the teacher, idle polls, answers,
              memory; 30 students onto a GPT-2 step; two replicas sharing a class through redis-server
    cloud     the server as Community Cloud runs it, in a cgroup: 1 core, then 0.5 core, and 2.7 GB; a class of 30
              following onto a GPT-2 step (websocket sessions), 10 visitors exploring in Chromium with 2 training
    features  issue 41: an SAE trained on tinytales; GPT-2 small's shape with one SAE layer of the published size:
              a sentence's features, one pass over the bundled text and a feature's top contexts, steering, the
              memory with a class of 30
    pythia    issue 42: Pythia-70M's shape at the 8 training steps the picker shows, from a disk cache holding one
              repository at several revisions: switching the step on a page (on disk, then in memory), Watch it
              learn over the 8 steps the first time, the memory with two steps, GPT-2 small and a class of 30

    python -m bench                      every area
    python -m bench --only model,pages   some areas
    python -m bench --target pages.slowest_ms=20     one target changed for this run (to see a miss)

Comparisons are measured side by side in one run, interleaved, so a busy machine slows both sides alike;
the ratios are what to read. The run ends with a summary table of every target of the areas that ran, and
exits with status 1 when one is missed or could not be measured.
"""
AREAS = ("model", "pages", "lab", "load", "memory", "browser", "gpt2", "smollm2", "classroom", "cloud",
         "features", "pythia")
