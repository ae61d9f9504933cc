package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/serve"
	"github.com/ggload/ggload/serve/httpapi"
)

func init() {
	register(command{"serve", "MODEL [options]", "serve a model over llama-server's HTTP API (OpenAI, Anthropic and llama.cpp's own endpoints)", runServe})
	optionSets["serve"] = func() *optionSet {
		pf := defaultPlaceFlags()
		sf := newServeFlags()
		return serveOptions(&pf, &sf)
	}
}

// serveFlags are llama-server's own options (common/arg.cpp's server
// examples): the listener, the HTTP layer, the engine, chat.
type serveFlags struct {
	hosts       []string
	port        int
	reusePort   bool
	sslKey      string
	sslCert     string
	threadsHTTP int
	http        httpapi.Options
	settings    httpapi.Settings
	engine      serve.Params
	sampling    sampleFlags
	aliases     []string
	tags        []string
	threads     int
	timeout     time.Duration
	npGiven     bool
	chat        serveChatFlags
	// the router's (router.go): the pool
	router routerFlags
}

// serveChatFlags are the chat options the chat endpoints read.
type serveChatFlags struct {
	jinja          bool
	template       string
	templateFile   string
	kwargs         string
	reasoning      string // --reasoning-format
	budget         int
	budgetMessage  string
	enableThinking int // --reasoning: -1 auto, 0 off, 1 on
	prefill        bool
}

func newServeFlags() serveFlags {
	return serveFlags{hosts: []string{"127.0.0.1"}, port: 8080, sampling: newSampleFlags(), threads: mathThreads(), router: newRouterFlags(),
		timeout: 3600 * time.Second, chat: serveChatFlags{jinja: true, budget: -1, enableThinking: -1, prefill: true},
		settings: httpapi.Settings{UI: true}}
}

// Why ggload refuses the options of what comes later.
const (
	whyUI       = "the web UI: ggload serves the API alone"
	whyTools    = "the agent tools, MCP servers and their CORS proxy: ggload serves models, it runs no tools"
	whyMedia    = "images and audio: ggload's server takes no multimodal projector yet"
	whySpec     = "speculative decoding: ggload's engine decodes the model alone"
	whyNoSSLTLS = "TLS needs both --ssl-key-file and --ssl-cert-file"
)

func serveOptions(pf *placeFlags, sf *serveFlags) *optionSet {
	s := newOptionSet("serve", "Load MODEL with llama.cpp's options and serve it over HTTP as llama-server of "+pinTag()+" serves it: the same endpoints (llama.cpp's own, OpenAI's, Anthropic's), the same JSON, status codes, errors and server-sent events. The server's options are llama-server's, with their LLAMA_ARG_* variables.",
		"ggload serve MODEL [options]", "ggload serve -m MODEL --host 0.0.0.0 --port 8080 [options]")
	pf.add(s)
	sf.addServer(s)
	sf.addEngine(s)
	sf.addChat(s)
	sf.sampling.add(s)
	sf.router.add(s)
	sf.addLater(s)
	return s
}

func (sf *serveFlags) addServer(s *optionSet) {
	s.group("server (llama-server's listener and HTTP options)")
	s.add(&option{names: []string{"--host"}, value: "HOST", env: "LLAMA_ARG_HOST",
		help: "IP addresses to listen on, comma-separated, or UNIX socket paths ending in .sock (default: 127.0.0.1)",
		set: func(v string) error {
			sf.hosts = sf.hosts[:0]
			for _, h := range parseCSVRow(v) {
				if h = strings.TrimSpace(h); h != "" {
					sf.hosts = append(sf.hosts, h)
				}
			}
			if len(sf.hosts) == 0 {
				return errors.New("--host requires at least one address")
			}
			return nil
		}})
	s.add(&option{names: []string{"--port"}, value: "PORT", env: "LLAMA_ARG_PORT", help: "port to listen on (default: 8080; 0: any free port)",
		set: func(v string) error {
			n, err := intIn(v, 0, 65535)
			sf.port = int(n)
			return err
		}})
	s.add(&option{names: []string{"--reuse-port"}, env: "LLAMA_ARG_REUSE_PORT", help: "allow multiple sockets to bind to the same port (default: disabled)",
		on: func(on bool) error { sf.reusePort = on; return nil }})
	s.add(&option{names: []string{"--api-prefix"}, value: "PREFIX", env: "LLAMA_ARG_API_PREFIX", help: "prefix path the server serves from, without the trailing slash (default: none)",
		set: func(v string) error { sf.http.APIPrefix = v; return nil }})
	s.add(&option{names: []string{"--cors-origins"}, value: "ORIGINS", env: "LLAMA_ARG_CORS_ORIGINS",
		help: "comma-separated list of allowed origins for CORS (default: *); 'localhost': the Origin header reflected only when it is a local host",
		set:  func(v string) error { sf.http.CORSOrigins = v; return nil }})
	s.add(&option{names: []string{"--cors-methods"}, value: "METHODS", env: "LLAMA_ARG_CORS_METHODS", help: "comma-separated list of allowed methods for CORS (default: GET, POST, DELETE, OPTIONS)",
		set: func(v string) error { sf.http.CORSMethods = v; return nil }})
	s.add(&option{names: []string{"--cors-headers"}, value: "HEADERS", env: "LLAMA_ARG_CORS_HEADERS", help: "comma-separated list of allowed headers for CORS (default: *)",
		set: func(v string) error { sf.http.CORSHeaders = v; return nil }})
	s.add(&option{names: []string{"--cors-credentials"}, neg: []string{"--no-cors-credentials"}, env: "LLAMA_ARG_CORS_CREDENTIALS",
		help: "whether to allow credentials for CORS (default: enabled; with --cors-origins *, the Origin header is echoed back)",
		on:   func(on bool) error { sf.http.NoCORSCredentials = !on; return nil }})
	s.add(&option{names: []string{"--api-key"}, value: "KEY", env: "LLAMA_API_KEY", secret: true,
		help: "API key to use for authentication, multiple keys as a comma-separated list (default: none)",
		set: func(v string) error {
			for _, k := range parseCSVRow(v) {
				if k != "" {
					sf.http.APIKeys = append(sf.http.APIKeys, k)
				}
			}
			return nil
		}})
	s.add(&option{names: []string{"--api-key-file"}, value: "FNAME", env: "LLAMA_ARG_API_KEY_FILE",
		help: "file of API keys, one per line; lines starting with a hash are comments (default: none)",
		set: func(v string) error {
			keys, err := readKeyFile(v)
			sf.http.APIKeys = append(sf.http.APIKeys, keys...)
			return err
		}})
	s.add(&option{names: []string{"--ssl-key-file"}, value: "FNAME", env: "LLAMA_ARG_SSL_KEY_FILE", help: "a PEM-encoded private key: serve HTTPS (with --ssl-cert-file)",
		set: func(v string) error { sf.sslKey = v; return nil }})
	s.add(&option{names: []string{"--ssl-cert-file"}, value: "FNAME", env: "LLAMA_ARG_SSL_CERT_FILE", help: "a PEM-encoded certificate: serve HTTPS (with --ssl-key-file)",
		set: func(v string) error { sf.sslCert = v; return nil }})
	s.add(&option{names: []string{"-to", "--timeout"}, value: "N", env: "LLAMA_ARG_TIMEOUT", help: "server read/write timeout in seconds (default: 3600)",
		set: func(v string) error {
			n, err := intIn(v, 1, math.MaxInt32)
			sf.timeout = time.Duration(n) * time.Second
			return err
		}})
	s.add(&option{names: []string{"--sse-ping-interval"}, value: "N", env: "LLAMA_ARG_SSE_PING_INTERVAL", help: "server SSE ping interval in seconds (-1 = disabled, default: 30)",
		set: func(v string) error {
			n, err := intIn(v, math.MinInt32, math.MaxInt32)
			sf.settings.SSEPingInterval = int(n)
			if n == 0 {
				sf.settings.SSEPingInterval = -1
			}
			return err
		}})
	s.add(&option{names: []string{"--threads-http"}, value: "N", env: "LLAMA_ARG_THREADS_HTTP",
		help: "requests served at once (default: -1 = any number; Go serves each on its own goroutine, so this bounds the connections)",
		set: func(v string) error {
			n, err := intIn(v, math.MinInt32, math.MaxInt32)
			sf.threadsHTTP = int(n)
			return err
		}})
	s.add(&option{names: []string{"--metrics"}, env: "LLAMA_ARG_ENDPOINT_METRICS", help: "enable the Prometheus metrics endpoint (default: disabled)",
		on: func(on bool) error { sf.http.Metrics = on; return nil }})
	s.add(&option{names: []string{"--props"}, env: "LLAMA_ARG_ENDPOINT_PROPS", help: "enable changing global properties via POST /props (default: disabled)",
		on: func(on bool) error { sf.http.Props = on; return nil }})
	s.add(&option{names: []string{"--slots"}, neg: []string{"--no-slots"}, env: "LLAMA_ARG_ENDPOINT_SLOTS", help: "expose the slots monitoring endpoint (default: enabled)",
		on: func(on bool) error { sf.http.NoSlots = !on; return nil }})
	s.add(&option{names: []string{"-a", "--alias"}, value: "STRING", env: "LLAMA_ARG_ALIAS", help: "model name aliases, comma-separated (to be used by the API)",
		set: func(v string) error {
			for _, a := range strings.Split(v, ",") {
				if a = strings.TrimSpace(a); a != "" {
					sf.aliases = append(sf.aliases, a)
				}
			}
			return nil
		}})
	s.add(&option{names: []string{"--tags"}, value: "STRING", env: "LLAMA_ARG_TAGS", help: "model tags, comma-separated (informational, not used for routing)",
		set: func(v string) error {
			for _, a := range strings.Split(v, ",") {
				if a = strings.TrimSpace(a); a != "" {
					sf.tags = append(sf.tags, a)
				}
			}
			return nil
		}})
	s.add(&option{names: []string{"-v", "--verbose", "--log-verbose"}, help: "answers carry __verbose, as llama-server's with -v",
		on: func(on bool) error { sf.settings.Verbose = on; return nil }})
	s.add(&option{names: []string{"--ui", "--webui"}, neg: []string{"--no-ui", "--no-webui"}, env: "LLAMA_ARG_UI",
		help: "llama-server's web UI; ggload has none, and --ui only sets what /props reports (default: enabled)",
		on:   func(on bool) error { sf.settings.UI = on; return nil }})
}

func readKeyFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("failed to open file '%s'", path)
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k := sc.Text(); k != "" && k[0] != '#' {
			keys = append(keys, k)
		}
	}
	return keys, sc.Err()
}

func (sf *serveFlags) addEngine(s *optionSet) {
	p := &sf.engine
	s.group("engine (llama-server's slots, prompt cache and generation)")
	s.add(&option{names: []string{"-t", "--threads"}, value: "N", env: "LLAMA_ARG_THREADS", help: fmt.Sprintf("CPU threads (default: the physical cores, %d here)", mathThreads()),
		set: func(v string) error {
			n, err := intIn(v, 1, maxRunThreads)
			sf.threads = int(n)
			return err
		}})
	intOpt := func(names []string, env, help string, lo, hi int64, dst *int) {
		s.add(&option{names: names, value: "N", env: env, help: help, set: func(v string) error {
			n, err := intIn(v, lo, hi)
			*dst = int(n)
			return err
		}})
	}
	intOpt([]string{"-n", "--predict", "--n-predict"}, "LLAMA_ARG_N_PREDICT", "tokens to predict, a request's default (default: -1, infinity)", -2, math.MaxInt32, &p.NPredict)
	intOpt([]string{"--keep"}, "", "tokens of the prompt a context shift keeps (default: 0; -1: all)", -1, math.MaxInt32, &p.Keep)
	s.add(&option{names: []string{"--context-shift"}, neg: []string{"--no-context-shift"}, env: "LLAMA_ARG_CONTEXT_SHIFT", help: "shift the context on infinite text generation (default: disabled)",
		on: func(on bool) error { p.ContextShift = on; return nil }})
	s.add(&option{names: []string{"--cache-prompt"}, neg: []string{"--no-cache-prompt"}, env: "LLAMA_ARG_CACHE_PROMPT", help: "prompt caching (default: enabled)",
		on: func(on bool) error { p.NoCachePrompt = !on; return nil }})
	intOpt([]string{"--cache-reuse"}, "LLAMA_ARG_CACHE_REUSE", "min chunk size to reuse from the cache via KV shifting (default: 0)", 0, math.MaxInt32, &p.CacheReuse)
	s.add(&option{names: []string{"-cram", "--cache-ram"}, value: "N", env: "LLAMA_ARG_CACHE_RAM", help: "the prompt cache's host memory in MiB (default: 8192; -1: no limit, 0: off)",
		set: func(v string) error {
			n, err := intIn(v, -1, math.MaxInt32)
			p.CacheRAMMiB, p.NoCacheRAM = int(n), n == 0
			return err
		}})
	s.add(&option{names: []string{"--cache-idle-slots"}, neg: []string{"--no-cache-idle-slots"}, env: "LLAMA_ARG_CACHE_IDLE_SLOTS", help: "save idle slots to the prompt cache (default: enabled)",
		on: func(on bool) error { p.NoCacheIdleSlots = !on; return nil }})
	s.add(&option{names: []string{"-ctxcp", "--ctx-checkpoints", "--swa-checkpoints"}, value: "N", env: "LLAMA_ARG_CTX_CHECKPOINTS", help: "context checkpoints a slot keeps (default: 32)",
		set: func(v string) error {
			n, err := intIn(v, 0, math.MaxInt32)
			p.CtxCheckpoints = int(n)
			if n == 0 {
				p.CtxCheckpoints = -1
			}
			return err
		}})
	intOpt([]string{"-cms", "--checkpoint-min-step"}, "LLAMA_ARG_CHECKPOINT_MIN_SPACING_NT", "least spacing of context checkpoints (default: 8192)", 1, math.MaxInt32, &p.CheckpointMinStep)
	s.add(&option{names: []string{"-sps", "--slot-prompt-similarity"}, value: "SIMILARITY", help: "how much a prompt must match a slot's to use it (default: 0.1; 0: off)",
		set: func(v string) error {
			f, err := floatArg(v)
			p.SlotPromptSimilarity = f
			if f == 0 {
				p.SlotPromptSimilarity = -1
			}
			return err
		}})
	s.add(&option{names: []string{"-cb", "--cont-batching"}, neg: []string{"-nocb", "--no-cont-batching"}, env: "LLAMA_ARG_CONT_BATCHING", help: "continuous batching (default: enabled)",
		on: func(on bool) error { p.NoContBatching = !on; return nil }})
	intOpt([]string{"--kv-unified-per-slot"}, "LLAMA_ARG_KV_UNIFIED_PER_SLOT", "a cap on each slot's context (default: 0, none)", 0, math.MaxInt32, &p.KVUnifiedPerSlot)
	s.add(&option{names: []string{"--slot-save-path"}, value: "PATH", help: "directory slots are saved to and restored from (default: disabled)",
		set: func(v string) error {
			fi, err := os.Stat(v)
			if err != nil || !fi.IsDir() {
				return fmt.Errorf("not a directory: %s", v)
			}
			if !strings.HasSuffix(v, string(filepath.Separator)) {
				v += string(filepath.Separator)
			}
			p.SlotSavePath, sf.settings.SlotSavePath = v, v
			return nil
		}})
	s.add(&option{names: []string{"-r", "--reverse-prompt"}, value: "PROMPT", help: "a stop string of every request (default: none)",
		set: func(v string) error { p.Stop = append(p.Stop, v); return nil }})
	s.add(&option{names: []string{"-sp", "--special"}, help: "special tokens' text in the output (default: false)",
		on: func(on bool) error { p.Special = on; return nil }})
	s.add(&option{names: []string{"--embd-normalize"}, value: "N", help: "embeddings' normalization (-1 none, 0 max absolute int16, 1 taxicab, 2 Euclidean, >2 p-norm; default: 2)",
		set: func(v string) error {
			n, err := intIn(v, math.MinInt32, math.MaxInt32)
			p.EmbdNormalize, p.NoEmbdNormalize = int(n), n == -1
			sf.settings.EmbdNormalize, sf.settings.NoEmbdNormalize = int(n), n == -1
			return err
		}})
	s.add(&option{names: []string{"--spm-infill"}, help: "infill's suffix before its prefix (default: disabled)",
		on: func(on bool) error { sf.settings.SPMInfill = on; return nil }})
}

func (sf *serveFlags) addChat(s *optionSet) {
	c := &sf.chat
	s.group("chat (templates and reasoning)")
	s.add(&option{names: []string{"--jinja"}, neg: []string{"--no-jinja"}, env: "LLAMA_ARG_JINJA", help: "the Jinja template engine for chat (default: enabled)",
		on: func(on bool) error { c.jinja = on; return nil }})
	s.add(&option{names: []string{"--chat-template"}, value: "JINJA_TEMPLATE", env: "LLAMA_ARG_CHAT_TEMPLATE", help: "a chat template, or the name of a built-in one (default: the model's)",
		set: func(v string) error { c.template = v; return nil }})
	s.add(&option{names: []string{"--chat-template-file"}, value: "JINJA_TEMPLATE_FILE", env: "LLAMA_ARG_CHAT_TEMPLATE_FILE", help: "a file holding the chat template",
		set: func(v string) error {
			b, err := os.ReadFile(v)
			c.template, c.templateFile = string(b), v
			return err
		}})
	s.add(&option{names: []string{"--chat-template-kwargs"}, value: "STRING", env: "LLAMA_ARG_CHAT_TEMPLATE_KWARGS", help: "a JSON object of the template's extra parameters",
		set: func(v string) error { c.kwargs = v; return nil }})
	s.add(&option{names: []string{"-rea", "--reasoning"}, value: "[on|off|auto]", help: "reasoning (thinking) in the chat template (default: auto)",
		set: func(v string) error {
			switch v {
			case "on", "true", "1", "enabled":
				c.enableThinking = 1
			case "off", "false", "0", "disabled":
				c.enableThinking = 0
			case "auto":
				c.enableThinking = -1
			default:
				return withHint(errors.New("invalid value"), v, []string{"on", "off", "auto"})
			}
			return nil
		}})
	s.add(&option{names: []string{"--reasoning-format"}, value: "FORMAT", env: "LLAMA_ARG_THINK", help: "where thoughts go: none, deepseek, deepseek-legacy (default: auto)",
		set: func(v string) error {
			switch v {
			case "none", "deepseek", "deepseek-legacy", "auto":
				c.reasoning = v
				return nil
			}
			return withHint(errors.New("invalid value"), v, []string{"none", "deepseek", "deepseek-legacy", "auto"})
		}})
	s.add(&option{names: []string{"--reasoning-budget"}, value: "N", env: "LLAMA_ARG_THINK_BUDGET", help: "tokens of reasoning allowed (default: -1, no limit)",
		set: func(v string) error {
			n, err := intIn(v, -1, math.MaxInt32)
			c.budget = int(n)
			return err
		}})
	s.add(&option{names: []string{"--reasoning-budget-message"}, value: "MESSAGE", env: "LLAMA_ARG_THINK_BUDGET_MESSAGE", help: "the message before the end of a reasoning cut by its budget",
		set: func(v string) error { c.budgetMessage = v; return nil }})
	s.add(&option{names: []string{"--prefill-assistant"}, neg: []string{"--no-prefill-assistant"}, env: "LLAMA_ARG_PREFILL_ASSISTANT", help: "a last assistant message is continued (default: enabled)",
		on: func(on bool) error { c.prefill = on; return nil }})
}

// addLater names the options of what ggload serve does not do yet, each
// refused with its reason.
func (sf *serveFlags) addLater(s *optionSet) {
	s.group("refused (llama-server's options for what ggload serve does not do)")
	for _, u := range []struct {
		names []string
		value string
		why   string
	}{
		{[]string{"--path"}, "PATH", whyUI},
		{[]string{"--ui-config", "--webui-config"}, "JSON", whyUI},
		{[]string{"--ui-config-file", "--webui-config-file"}, "PATH", whyUI},
		{[]string{"--ui-mcp-proxy", "--webui-mcp-proxy"}, "", whyTools},
		{[]string{"--tools"}, "TOOL1,TOOL2,...", whyTools},
		{[]string{"--tools-runtime"}, "OPTION", whyTools},
		{[]string{"--mcp-servers-config"}, "PATH", whyTools},
		{[]string{"--mcp-servers-json"}, "JSON", whyTools},
		{[]string{"-ag", "--agent"}, "", whyTools},
		{[]string{"--media-path"}, "PATH", whyMedia},
		{[]string{"--spec-type"}, "TYPE", whySpec},
		{[]string{"--spec-draft-n-max"}, "N", whySpec},
		{[]string{"--spec-draft-n-min"}, "N", whySpec},
	} {
		s.add(&option{names: u.names, value: u.value, unsupported: u.why})
	}
}

func runServe(ctx context.Context, args []string, stdout io.Writer) error {
	pf := defaultPlaceFlags()
	sf := newServeFlags()
	s := serveOptions(&pf, &sf)
	pos, err := s.parse(args)
	if err != nil {
		return helpOr(s, stdout, err)
	}
	if err := pf.finish(s); err != nil {
		return err
	}
	if pf.listDevices {
		return listDevices(ctx, &pf, stdout)
	}
	// no model: llama-server's router mode, whose models come from the
	// pool (serve_router.go)
	router := len(pos) == 0 && pf.model == "" && pf.modelURL == "" && pf.hub.repo == ""
	path := ""
	if !router {
		if given := sf.router.given(s); len(given) > 0 {
			return s.errorf("%s: llama-server's router mode, which serves the models of --models-dir or --models-preset: give no model (-m)", strings.Join(given, ", "))
		}
		if o := s.byName["--sleep-idle-seconds"]; s.given[o] && sf.router.sleepIdle > 0 {
			return s.errorf("--sleep-idle-seconds: ggload unloads idle models in router mode (--models-dir, --models-preset), not yet one model given with -m")
		}
		if path, err = pf.modelPath(s, pos); err != nil {
			return err
		}
	}
	if (sf.sslKey == "") != (sf.sslCert == "") {
		return s.errorf("%s", whyNoSSLTLS)
	}
	if pf.mmproj.given() {
		return s.errorf("-mm/-mmu: %s", whyMedia)
	}
	if pf.draft.model != "" {
		return s.errorf("-md: %s", whySpec)
	}
	if err := sf.prepare(s, &pf); err != nil {
		return s.errorf("%v", err)
	}
	if router {
		return sf.serveRouter(ctx, &pf, args)
	}
	single := &httpapi.Single{}
	h := httpapi.New(single, sf.http)
	srv, errc, err := sf.start(h)
	if err != nil {
		return err
	}
	defer srv.Close()
	mo, release, err := sf.load(ctx, &pf, path)
	if err != nil {
		return err
	}
	defer release()
	single.M = mo
	h.SetReady()
	fmt.Fprintf(os.Stderr, "ggload: serve: model loaded: %s\n", mo.Name)
	return sf.wait(ctx, srv, errc)
}

// start opens the listeners and serves h on them.
func (sf *serveFlags) start(h http.Handler) (*http.Server, <-chan error, error) {
	srv, lns, err := sf.listen(h)
	if err != nil {
		return nil, nil, err
	}
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		go func() {
			var err error
			if sf.sslCert != "" {
				err = srv.ServeTLS(ln, sf.sslCert, sf.sslKey)
			} else {
				err = srv.Serve(ln)
			}
			if !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
		fmt.Fprintf(os.Stderr, "ggload: serve: listening on %s\n", listenName(ln, sf.sslCert != ""))
	}
	return srv, errc, nil
}

// wait serves until the context ends (SIGINT, SIGTERM) or a listener
// fails.
func (sf *serveFlags) wait(ctx context.Context, srv *http.Server, errc <-chan error) error {
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		srv.Shutdown(sctx)
		return nil
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	}
}

// prepare is llama-server's adjustment of its options before it loads:
// -np auto (4 slots over one unified cache), embeddings in one ubatch,
// --kv-unified-per-slot's context.
func (sf *serveFlags) prepare(s *optionSet, pf *placeFlags) error {
	c := &pf.context
	serve.ServerContext(c, !s.given[s.byName["-np"]])
	if sf.engine.KVUnifiedPerSlot > 0 && c.NCtx == 0 && !s.given[s.byName["-c"]] {
		c.NCtx = c.NParallel * sf.engine.KVUnifiedPerSlot
	}
	sf.engine.Threads = sf.threads
	sf.http.WriteTimeout = sf.timeout
	sf.gcpFromEnv()
	sf.settings.NPredict = sf.engine.NPredict
	sf.settings.Embedding = c.Embeddings
	sf.settings.Rerank = c.Embeddings && c.Pooling == place.PoolingRank
	return sf.chat.settings(&sf.settings.Chat)
}

// gcpFromEnv is llama-server's Google Cloud (Vertex AI) compatibility:
// AIP_MODE=PREDICTION adds the prediction route (AIP_PREDICT_ROUTE, else
// /predict), a second health route (AIP_HEALTH_ROUTE) and listens on
// AIP_HTTP_PORT (else 8080).
func (sf *serveFlags) gcpFromEnv() {
	if os.Getenv("AIP_MODE") != "PREDICTION" {
		return
	}
	route := func(name string) string {
		v := os.Getenv(name)
		if v != "" && v[0] != '/' {
			v = "/" + v
		}
		return v
	}
	sf.http.GCP = &httpapi.GCP{PredictRoute: route("AIP_PREDICT_ROUTE"), HealthRoute: route("AIP_HEALTH_ROUTE")}
	sf.port = 8080
	if p, err := strconv.Atoi(os.Getenv("AIP_HTTP_PORT")); err == nil {
		sf.port = p
	}
}

// settings are the chat flags as the handler takes them.
func (c *serveChatFlags) settings(cs *httpapi.ChatSettings) error {
	cs.Template, cs.TemplateName = c.template, c.templateFile
	o := &cs.Server
	o.Legacy, o.NoPrefillAssistant = !c.jinja, !c.prefill
	if c.reasoning != "" {
		o.ReasoningFormat = c.reasoning
	}
	switch c.enableThinking {
	case 1:
		o.Reasoning = "on"
	case 0:
		o.Reasoning = "off"
	}
	cs.ReasoningBudget, cs.ReasoningBudgetMessage = c.budget, c.budgetMessage
	if c.kwargs != "" {
		v, err := ojson.ParseString(c.kwargs)
		if err != nil || !v.IsObject() {
			return fmt.Errorf("--chat-template-kwargs: want a JSON object: %v", err)
		}
		o.Kwargs = map[string]string{}
		for _, m := range v.Members() {
			o.Kwargs[m.Key] = m.Value.DumpSafe(-1)
		}
	}
	return nil
}

// listen opens the listeners: TCP addresses and Unix sockets.
func (sf *serveFlags) listen(h http.Handler) (*http.Server, []net.Listener, error) {
	var h2 http.Handler = h
	if sf.threadsHTTP > 0 {
		h2 = limitHandler(h, sf.threadsHTTP)
	}
	srv := &http.Server{Handler: h2, ReadHeaderTimeout: 30 * time.Second, ReadTimeout: sf.timeout, IdleTimeout: 5 * time.Second,
		MaxHeaderBytes: 8192 * 100}
	if sf.sslCert != "" {
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	var lns []net.Listener
	lc := net.ListenConfig{}
	if sf.reusePort {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			c.Control(func(fd uintptr) { serr = reusePort(fd) })
			return serr
		}
	}
	tcp := 0
	for _, host := range sf.hosts {
		if !strings.HasSuffix(host, ".sock") {
			tcp++
		}
	}
	if sf.port == 0 && tcp > 1 {
		return nil, nil, errors.New("serve: --port 0 is not supported with multiple TCP addresses")
	}
	for _, host := range sf.hosts {
		var ln net.Listener
		var err error
		if strings.HasSuffix(host, ".sock") {
			ln, err = lc.Listen(context.Background(), "unix", host)
		} else {
			network := "tcp"
			if tcp > 1 && strings.Contains(host, ":") {
				network = "tcp6"
			}
			ln, err = lc.Listen(context.Background(), network, net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(sf.port)))
		}
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, nil, fmt.Errorf("serve: couldn't bind HTTP server socket, hostname: %s, port: %d: %w", host, sf.port, err)
		}
		lns = append(lns, ln)
	}
	return srv, lns, nil
}

func listenName(ln net.Listener, tls bool) string {
	if ln.Addr().Network() == "unix" {
		return "unix://" + ln.Addr().String()
	}
	if tls {
		return "https://" + ln.Addr().String()
	}
	return "http://" + ln.Addr().String()
}

// limitHandler serves at most n requests at once (--threads-http); the
// others wait for a turn or for their client to leave.
func limitHandler(h http.Handler, n int) http.Handler {
	sem := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
			h.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	})
}

// load plans, loads and starts the engine on the model.
func (sf *serveFlags) load(ctx context.Context, pf *placeFlags, path string) (*httpapi.Model, func(), error) {
	pd, err := planModel(ctx, pf, path)
	if err != nil {
		return nil, nil, err
	}
	if err := pd.refused(); err != nil {
		pd.Close()
		return nil, nil, err
	}
	lm, err := loadPlan(ctx, pd.plan, pf, &loadFlags{progress: "off"})
	if err != nil {
		pd.Close()
		return nil, nil, err
	}
	// the options, and the model's sampling defaults where they set none
	ep := sf.engine
	sp := sf.sampling.params(pd.m, true)
	ep.Sampling = &sp
	e, err := serve.New(lm, ep)
	if err != nil {
		lm.Close()
		pd.Close()
		return nil, nil, err
	}
	mo, err := httpapi.NewModel(e, lm, path, sf.aliases, sf.tags, sf.settings)
	if err != nil {
		e.Close()
		lm.Close()
		pd.Close()
		return nil, nil, err
	}
	return mo, func() {
		e.Close()
		lm.Close()
		pd.Close()
	}, nil
}
