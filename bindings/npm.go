package bindings

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// registry is the base URL of an npm registry and where it was given.
type registry struct {
	base *url.URL
	from string // "as given", "GGLOAD_NPM_REGISTRY", "registry= in /home/u/.npmrc"
}

// findRegistry is the registry the environment names: GGLOAD_NPM_REGISTRY,
// then npm's own setting as npm reads it (npm_config_registry, then the
// registry= line of the user's .npmrc).
func findRegistry() (registry, error) {
	for _, name := range []string{"GGLOAD_NPM_REGISTRY", "npm_config_registry", "NPM_CONFIG_REGISTRY"} {
		if v := os.Getenv(name); v != "" {
			return parseRegistry(v, name)
		}
	}
	if rc := npmrcPath(); rc != "" {
		b, err := os.ReadFile(rc)
		switch {
		case err == nil:
			if v := npmrcRegistry(string(b)); v != "" {
				return parseRegistry(v, "registry= in "+rc)
			}
		case !errors.Is(err, fs.ErrNotExist):
			return registry{}, fmt.Errorf("npm's user configuration: %v", err)
		}
	}
	return registry{}, fmt.Errorf("%w: ggload names none of its own; give its base URL with ggload fetch --registry URL (InstallOptions.Registry) or GGLOAD_NPM_REGISTRY, or set npm's (npm config set registry URL writes it to ~/.npmrc)", ErrNoRegistry)
}

// npmrcPath is the user's npm configuration file as npm finds it:
// npm_config_userconfig when set, else ~/.npmrc; "" without a home.
func npmrcPath() string {
	for _, name := range []string{"npm_config_userconfig", "NPM_CONFIG_USERCONFIG"} {
		if v := os.Getenv(name); v != "" {
			return v
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".npmrc")
}

// npmEnvRef is a reference to an environment variable in an .npmrc value,
// ${NAME} (or ${NAME?}, which npm leaves empty when NAME is unset).
var npmEnvRef = regexp.MustCompile(`\$\{([^${}?]+)\??\}`)

// npmrcRegistry reads the top-level registry setting of an .npmrc, in
// npm's ini format: "key = value" lines, the last one winning; lines that
// start with ; or # are comments, as is the rest of an unquoted value from
// a ; or #; a value may be quoted; keys under a [section] header belong to
// that section; ${NAME} is replaced by the environment variable NAME.
// It returns "" when the file sets no registry.
func npmrcRegistry(text string) string {
	val, section := "", false
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == ';' || line[0] == '#':
			continue
		case line[0] == '[':
			section = true
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if section || !ok || strings.TrimSpace(k) != "registry" {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		} else if i := strings.IndexAny(v, ";#"); i >= 0 {
			v = strings.TrimSpace(v[:i])
		}
		val = npmEnvRef.ReplaceAllStringFunc(v, func(ref string) string {
			return os.Getenv(npmEnvRef.FindStringSubmatch(ref)[1])
		})
	}
	return val
}

// parseRegistry checks a registry's base URL; from says where it was given.
func parseRegistry(raw, from string) (registry, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return registry{}, fmt.Errorf("npm registry (%s): %v", from, err)
	}
	if err := checkURL(u); err != nil {
		return registry{}, fmt.Errorf("npm registry %s (%s): %v", u.Redacted(), from, err)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return registry{}, fmt.Errorf("npm registry %s (%s): a base URL takes no query or fragment", u.Redacted(), from)
	}
	return registry{base: u, from: from}, nil
}

// tarballURL is where the registry serves a package's tarball:
// <registry>/<package>/-/<name>-<version>.tgz, name being the package's
// name without its @scope/.
func (r registry) tarballURL(pkg, version string) *url.URL {
	u := *r.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + pkg + "/-/" + path.Base(pkg) + "-" + version + ".tgz"
	u.RawPath = ""
	return &u
}

// tarballName is the file name of a package's tarball in the user cache,
// the name `npm pack` gives it and scripts/lib.sh keeps it under:
// "@scope/name" becomes "scope-name-<version>.tgz".
func tarballName(pkg, version string) string {
	return strings.ReplaceAll(strings.TrimPrefix(pkg, "@"), "/", "-") + "-" + version + ".tgz"
}

// checkURL refuses a URL that Install does not download from: anything
// but https, save plain http to a loopback address (a server on this
// machine).
func checkURL(u *url.URL) error {
	switch {
	case !u.IsAbs() || u.Host == "":
		return errors.New("not an absolute URL")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return errors.New("plain http is refused but to a loopback address; use https")
	}
	return fmt.Errorf("scheme %s: want https", u.Scheme)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// client is opts.Client, or a client of its own, that follows redirects
// to https alone (plain http to a loopback address only from a request
// that was itself to one), at most 10.
func (opts InstallOptions) client() *http.Client {
	c := http.Client{}
	if opts.Client != nil {
		c = *opts.Client
	}
	next := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != "https" && (via[0].URL.Scheme == "https" || checkURL(req.URL) != nil) {
			return fmt.Errorf("redirect to %s refused: redirects are followed to https only", req.URL.Redacted())
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &c
}

// tarball opens the package's tarball, its sha256 checked against want:
// the user cache's copy when it matches, else one downloaded into the
// cache. from is the URL it was downloaded from, "" for the cached copy.
func (in installer) tarball(ctx context.Context, pkg, want string, reg registry, opts InstallOptions) (f *os.File, from string, err error) {
	cache, err := CacheDir()
	if err != nil {
		return nil, "", fmt.Errorf("no user cache to keep the tarball in (set GGLOAD_CACHE): %v", err)
	}
	dir := filepath.Join(cache, "npm")
	file := filepath.Join(dir, tarballName(pkg, in.pin.NPMVersion))
	if f, err := openVerified(file, want); err == nil {
		return f, "", nil
	}
	if reg.base == nil {
		if reg, err = findRegistry(); err != nil {
			return nil, "", err
		}
	}
	u := reg.tarballURL(pkg, in.pin.NPMVersion)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(file)+".part-*")
	if err != nil {
		return nil, "", err
	}
	got, err := in.download(ctx, opts.client(), u, tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		err = tmp.Chmod(0o644) // as npm pack leaves it
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil && got != want {
		err = fmt.Errorf("%w: got %s, want %s (native/pin.env), downloaded from %s; nothing installed", ErrChecksum, got, want, u.Redacted())
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return nil, "", err
	}
	if f, err = openVerified(file, want); err != nil {
		return nil, "", err
	}
	return f, u.Redacted(), nil
}

// download writes what u serves to w, at most in.maxTarball bytes, and
// returns its sha256.
func (in installer) download(ctx context.Context, c *http.Client, u *url.URL, w io.Writer) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("User-Agent", "ggload")
	resp, err := c.Do(req)
	if err != nil {
		return "", err // names the URL, without its password
	}
	defer resp.Body.Close()
	at := resp.Request.URL.Redacted()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", at, resp.Status)
	}
	if resp.ContentLength > in.maxTarball {
		return "", fmt.Errorf("GET %s: %d bytes, more than the %d a pinned tarball may have", at, resp.ContentLength, in.maxTarball)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(resp.Body, in.maxTarball+1))
	if err != nil {
		return "", fmt.Errorf("GET %s: after %d bytes: %w", at, n, err)
	}
	if n > in.maxTarball {
		return "", fmt.Errorf("GET %s: more than the %d bytes a pinned tarball may have", at, in.maxTarball)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// openVerified opens the file when its sha256 is want, at its start.
func openVerified(file, want string) (*os.File, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		f.Close()
		return nil, err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		f.Close()
		return nil, fmt.Errorf("%w: %s: got %s, want %s (native/pin.env)", ErrChecksum, file, got, want)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// FetchCommand is the command that installs the pinned native set on
// this machine: ggload fetch where the environment names an npm
// registry (GGLOAD_NPM_REGISTRY, npm's setting), else with npm's own
// registry given on the command line; the set GGLOAD_VARIANT asks for
// (FetchSets) named, where it asks for one.
func FetchCommand() string {
	cmd := `ggload fetch --registry "$(npm config get registry)"`
	if _, err := findRegistry(); err == nil {
		cmd = "ggload fetch"
	}
	for _, set := range FetchSets() {
		cmd += " " + set
	}
	return cmd
}

// FetchSets is the set GGLOAD_VARIANT asks for (the plain set for
// "none"), which Find alone will take; nil where it is unset, and the
// default sets serve.
func FetchSets() []string {
	switch v := os.Getenv("GGLOAD_VARIANT"); v {
	case "":
		return nil
	case "none":
		return []string{Platform()}
	default:
		return []string{Platform() + "-" + v}
	}
}
