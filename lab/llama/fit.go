package llama

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ggload/ggload/bindings"
)

// commonLib is the part of libllama-common (the same prebuilt set) the
// tests use: llama.cpp's own -fit.
type commonLib struct {
	// common_params_fit_status common_fit_params(const char * path_model,
	//     llama_model_params *, llama_context_params *, float * tensor_split,
	//     llama_model_tensor_buft_override *, size_t * margins,
	//     uint32_t n_ctx_min, const common_fit_extra_model *, ggml_log_level)
	FitParams func(path string, mp *ModelParams, cp *ContextParams, ts *float32, tbo *buftOverride,
		margins *uint64, nCtxMin uint32, extra uintptr, level int32) int32 `c:"_Z17common_fit_paramsPKcP18llama_model_paramsP20llama_context_paramsPfP32llama_model_tensor_buft_overridePmjPK22common_fit_extra_model14ggml_log_level"`

	// void common_memory_breakdown_print(const llama_context *), and the
	// common log it prints to (at trace level)
	BreakdownPrint func(ctx uintptr)              `c:"_Z29common_memory_breakdown_printPK13llama_context"`
	LogMain        func() uintptr                 `c:"_Z15common_log_mainv"`
	LogSetFile     func(log uintptr, path string) `c:"_Z19common_log_set_fileP10common_logPKc"`
	LogPause       func(log uintptr)              `c:"_Z16common_log_pauseP10common_log"`
	LogResume      func(log uintptr)              `c:"_Z17common_log_resumeP10common_log"`
	LogVerbosity   func(level int32)              `c:"_Z30common_log_set_verbosity_tholdi"`
}

// BreakdownTable is the table llama.cpp's common_memory_breakdown_print
// prints of the context (its lines, without the trailing newline), read
// back from the common log's file.
func (c *Context) BreakdownTable() ([]string, error) {
	cl, err := c.l.common()
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "ggload-breakdown-*.log")
	if err != nil {
		return nil, err
	}
	path := f.Name()
	f.Close()
	defer os.Remove(path)
	breakdownMu.Lock()
	defer breakdownMu.Unlock()
	log := cl.LogMain()
	cl.LogVerbosity(1 << 20) // its lines are LOG_TRC
	cl.LogSetFile(log, path)
	cl.BreakdownPrint(c.h)
	cl.LogPause(log) // the worker writes what is queued, then stops
	b, err := os.ReadFile(path)
	cl.LogSetFile(log, "") // (a null path: no file; resumes the worker)
	cl.LogVerbosity(0)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "common_memory_breakdown_print: |") {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("llama: common_memory_breakdown_print wrote no table")
	}
	return out, nil
}

var breakdownMu sync.Mutex

var (
	commonOnce sync.Once
	commonL    *commonLib
	commonErr  error
)

// ErrNoCommon is wrapped by Fit's error when the native set has no
// libllama-common.
var ErrNoCommon = errors.New("no libllama-common in the native set")

// common opens libllama-common beside libllama (once per process).
func (l *Lib) common() (*commonLib, error) {
	commonOnce.Do(func() {
		path := filepath.Join(filepath.Dir(l.rt.Location().Llama), "libllama-common"+libSuffix())
		if _, err := os.Stat(path); err != nil {
			commonErr = fmt.Errorf("%w: %s (the prebuilt packages carry it: scripts/fetch-native.sh)", ErrNoCommon, path)
			return
		}
		h, err := bindings.OpenLibrary(path)
		if err != nil {
			commonErr = fmt.Errorf("llama: open %s: %w", path, err)
			return
		}
		c := &commonLib{}
		if err := bindings.Bind(c, h); err != nil {
			commonErr = fmt.Errorf("llama: %s: %w", path, err)
			return
		}
		commonL = c
	})
	return commonL, commonErr
}

func libSuffix() string {
	switch runtime.GOOS {
	case "darwin":
		return ".dylib"
	case "windows":
		return ".dll"
	}
	return ".so"
}

// FitOutcome is what llama.cpp's common_fit_params leaves in the model's
// and the context's parameters.
type FitOutcome struct {
	Status      int // 0 success, 1 failure, 2 error
	NCtx        uint32
	NGPULayers  int32
	TensorSplit []float32   // the split it wrote, without trailing zeros (nil when it wrote none)
	Overrides   [][2]string // pattern, buffer type name
}

// HaveCommon says whether libllama-common opens (the error says why not).
func (l *Lib) HaveCommon() error {
	_, err := l.common()
	return err
}

// FitExtra is a second model for Fit (common_fit_extra_model): its load,
// its context, and whether it runs on the main model's weights.
type FitExtra struct {
	Load        Load
	Context     ContextParams
	SharesModel bool
}

// fitExtraC mirrors struct common_fit_extra_model: 32 bytes.
type fitExtraC struct {
	path        *byte
	mparams     *ModelParams
	cparams     *ContextParams
	sharesModel bool
	_           [7]byte
}

// fitOverrides is llama_max_tensor_buft_overrides() of the pin.
const fitOverrides = 4096

// Fit runs llama.cpp's common_fit_params on a load and a context, with
// the margins per device (bytes; one applies to every device) and the
// smallest context it may set.
func (l *Lib) Fit(ld Load, cp ContextParams, margins []uint64, nCtxMin uint32) (FitOutcome, []LogLine, error) {
	return l.FitWith(ld, cp, margins, nCtxMin, nil)
}

// FitWith is Fit with a second model sharing the devices (nil: none).
func (l *Lib) FitWith(ld Load, cp ContextParams, margins []uint64, nCtxMin uint32, extra *FitExtra) (FitOutcome, []LogLine, error) {
	c, err := l.common()
	if err != nil {
		return FitOutcome{}, nil, err
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	mp, err := l.modelParams(ld, &pin)
	if err != nil {
		return FitOutcome{}, nil, err
	}
	nd := int(l.MaxDevices())
	ts := make([]float32, nd)
	tbo := make([]buftOverride, fitOverrides)
	m := make([]uint64, nd)
	for i := range m {
		switch {
		case len(margins) == 1:
			m[i] = margins[0]
		case i < len(margins):
			m[i] = margins[i]
		default:
			m[i] = 1 << 30
		}
	}
	pin.Pin(&ts[0])
	pin.Pin(&tbo[0])
	var lines []LogLine
	old := bindings.SetLogTap(func(level int, line string) { lines = append(lines, LogLine{level, line}) })
	var ex uintptr
	if extra != nil {
		emp, err := l.modelParams(extra.Load, &pin)
		if err != nil {
			return FitOutcome{}, nil, err
		}
		ecp := extra.Context
		e := &fitExtraC{path: bindings.CString(extra.Load.Path), mparams: &emp, cparams: &ecp, sharesModel: extra.SharesModel}
		pin.Pin(e)
		pin.Pin(e.path)
		pin.Pin(e.mparams)
		pin.Pin(e.cparams)
		ex = uintptr(unsafe.Pointer(e))
	}
	status := c.FitParams(ld.Path, &mp, &cp, &ts[0], &tbo[0], &m[0], nCtxMin, ex, 1)
	bindings.SetLogTap(old)
	out := FitOutcome{Status: int(status), NCtx: cp.NCtx, NGPULayers: mp.NGPULayers}
	if mp.TensorSplit == uintptr(unsafe.Pointer(&ts[0])) {
		out.TensorSplit = ts
		for len(out.TensorSplit) > 0 && out.TensorSplit[len(out.TensorSplit)-1] == 0 {
			out.TensorSplit = out.TensorSplit[:len(out.TensorSplit)-1]
		}
	}
	if mp.TensorBuftOverrides == uintptr(unsafe.Pointer(&tbo[0])) {
		for _, o := range tbo {
			if o.pattern == nil {
				break
			}
			out.Overrides = append(out.Overrides, [2]string{bindings.GoString(o.pattern), bindings.Current().BuftName(o.buft)})
		}
	}
	return out, lines, nil
}
