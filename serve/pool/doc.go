// Package pool serves many models from one process, as llama-server's
// router mode (tools/server/server-models.cpp) serves them from child
// processes: models by name, loaded when a request names them, unloaded
// least recently used first. Where the router counts models
// (--models-max), the pool also holds each device's memory to the byte:
// it knows what a model needs before it loads it, and loads nothing that
// does not fit.
//
// # Models
//
// A model comes from the models directory (--models-dir: each GGUF file
// at its top is a model named after the file; each subdirectory is a
// model of its name, its first split "-00001-of-" or its GGUF file, with
// the projector, "mmproj" in a name, and a draft, "mtp-", "dspark-" or
// "dflash-", beside it), from the presets file (--models-preset, the
// pin's INI format of common/preset.cpp: a section per model, "[*]" for
// all of them), or from the program (Pool.Add). A preset's settings are
// llama-server's options; the pool reads the router's own (model,
// mmproj, alias, tags, load-on-startup) and ggload's (pin, keep-alive),
// and hands the others to Params.Configure (ggload serve reads them as
// its command line). Without Configure it reads those that decide a
// model's memory itself: ctx-size, parallel, n-gpu-layers, batch-size,
// ubatch-size, threads, kv-unified, cache-ram, fit, fit-target, fit-ctx
// and device.
//
// # Memory
//
// The pool keeps an account per device: the host (HostDevice) and each
// device of the runtime. Each has a budget (Params.Budgets; by default
// the device's free memory when the pool opens, and for the host the
// memory the system says is available: ggml's CPU device reports the
// host's total as free). A model holds, on each account, exactly what
// its plan sizes as -fit sizes it (place.Plan.DeviceMemory: weights, the
// context's memory, compute buffers) while it loads, then what its
// engine allocated (serve.Engine.Memory), and on the host its prompt
// cache's limit (--cache-ram), which the cache may grow to: with
// llama-server's default of 8192 MiB, each model holds 8 GiB of the
// host's budget, as each of the router's children may fill that much;
// a smaller --cache-ram (or 0) leaves room for more models.
//
// Which figure is the truthful one: the sum of the resident models'
// exact memory is what the pool itself holds, to the byte, on every
// device, the host included, where a device's own report says nothing
// (the CPU reports its total as free, lavapipe its heap size, an RPC
// server its device's figure). A GPU's report of its free memory is
// truthful about everything else on the device (other processes, the
// driver): the pool gives a model no more than the budget less what the
// models hold, and no more than the device reports free less what the
// loads in flight may not have allocated yet.
//
// A model is planned with -fit (place.Fit, common_fit_params) in the
// room the pool can give it: each budget less what the pinned models
// hold, the host's less the model's own prompt cache; -fit's targets are
// then kept free within that room. Models that can leave are evicted for
// the room rather than shrinking the newcomer's context: a model's
// context does not depend on which models happen to be resident. (The
// router's children each fit against what the others hold, so a model's
// context, and whether it fits at all, depends on load order.)
//
// # Admission and eviction
//
// A load reserves its plan's memory on every account before it
// allocates anything, when the reservation fits each account's room and
// --models-max allows it. Otherwise idle models (resident, no request,
// no request waiting for them, not pinned) that hold memory where the
// model lacks it are evicted, least recently used first, but only when
// evicting them is enough. Otherwise the load waits for busy models to
// become idle (Params.MaxWait, and each request's context), or is
// refused with a *RoomError naming each device, what the model needs and
// what it can be given. A model that cannot fit even with every
// evictable model gone is refused at once. Nothing that does not fit is
// ever loaded: a device never holds more than its budget.
//
// Different models load at once; one model loads once, however many
// requests ask for it, and every request waiting for it gets its result.
// A failed load, a cancelled wait, a panic in a callback (the loader's
// progress callback, Configure) end that load or that request alone.
//
// A model idle for its keep-alive (Options.KeepAlive, else
// --sleep-idle-seconds) is unloaded and shows as Sleeping; a request
// loads it again. A pinned model stays until Unload or Close. Unload
// lets a model's requests finish (StopTimeout) before it ends them.
//
// Before a resident model serves a request, its files are checked
// against what was loaded (loader.Model.CheckFile: the same file at the
// path, its size and modification time; and the inode's change time): a
// model whose file changed or disappeared takes no new requests,
// unloads when its requests end, and is read anew by its next load.
//
// # Above it
//
// An HTTP layer serves the router's endpoints with Acquire (a request's
// "model"), Models (GET /models), Load and Unload (POST /models/load,
// /models/unload), Subscribe (/models/sse) and ModelsMax (/props). The
// pool makes no HTTP decision: its errors are typed (NotFoundError,
// RoomError, LoadError, ErrNotLoaded, ErrRunning) for the layer to map.
package pool
