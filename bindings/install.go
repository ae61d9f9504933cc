package bindings

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/ggload/ggload/native"
)

// InstallOptions steer Install; the zero value uses the environment.
type InstallOptions struct {
	// Registry is the base URL of the npm registry that serves the pinned
	// packages. Empty means GGLOAD_NPM_REGISTRY, then npm's own setting
	// (see Install).
	Registry string
	// Client makes the request; nil means a client of its own over
	// http.DefaultTransport (which takes its proxy from the environment).
	// Install checks every redirect whichever client is given.
	Client *http.Client
}

// Installed says what Install did.
type Installed struct {
	Set     string // "linux-x64"
	Package string // the pinned package: "@node-llama-cpp/linux-x64@3.22.1"
	Dir     string // the set's directory, <dir>/<set>
	// UpToDate: the set's stamp already named the pinned package and
	// sha256, and the set was left alone (nothing below is set).
	UpToDate bool
	Files    []string // the files installed, by name, sorted (the stamp not counted)
	Tarball  string   // the verified tarball, in the user cache
	// URL is where the tarball was downloaded from (without its password);
	// empty when the cached copy matched the pin and was used.
	URL string
}

// ErrChecksum is wrapped by Install's error when a tarball's sha256 is not
// the pin's (native/pin.env).
var ErrChecksum = errors.New("sha256 does not match the pin")

// ErrNoRegistry is wrapped by Install's error when a tarball must be
// downloaded and no npm registry was given.
var ErrNoRegistry = errors.New("no npm registry given")

// ErrUnsafeArchive is wrapped by Install's error when a tarball holds an
// entry whose path leaves the directory it is unpacked into.
var ErrUnsafeArchive = errors.New("archive entry leaves the package")

// InstallError is an error of Install: the set, its pinned package, and
// the reason, which wraps ErrChecksum, ErrNoRegistry, ErrUnsafeArchive or
// the error of the file system or the network.
type InstallError struct {
	Set     string
	Package string // name@version; empty when no package is pinned for Set
	Err     error
}

func (e *InstallError) Error() string {
	if e.Package == "" {
		return fmt.Sprintf("install %s: %v", e.Set, e.Err)
	}
	return fmt.Sprintf("install %s (%s): %v", e.Set, e.Package, e.Err)
}

func (e *InstallError) Unwrap() error { return e.Err }

// stampFile names, in a prebuilt set's directory, the package and sha256
// the set was unpacked from; scripts/fetch-native.sh writes the same.
const stampFile = ".prebuilt"

// Install puts the pinned prebuilt set named set (linux-x64,
// linux-x64-vulkan, linux-x64-cuda: native/pin.env) into dir/set without
// npm, as scripts/fetch-native.sh does: the libraries of the package's
// bins/<set>/ (*.so*, *.dylib, *.dll), its LICENSE as
// LICENSE.node-llama-cpp, and the stamp (.prebuilt) naming the package and
// its sha256. An empty dir is the user cache's <CacheDir>/lib/<tag>, where
// Find looks, so that every ggload program finds the set. A set whose
// stamp names the pin is left alone.
//
// The tarball is kept in <CacheDir>/npm/ under the scripts' name for it
// and used while its sha256 is the pin's; otherwise it is downloaded from
// <registry>/<package>/-/<name>-<version>.tgz. ggload names no registry of
// its own. The base URL is, in order: opts.Registry; GGLOAD_NPM_REGISTRY;
// npm's own setting as npm reads it, without running npm:
// npm_config_registry (or NPM_CONFIG_REGISTRY), then the registry= line of
// the user's .npmrc (~/.npmrc, or npm_config_userconfig). With none, the
// error wraps ErrNoRegistry and says how to give one. npm's other settings
// (per-scope registries, credentials, certificate authorities, project
// and global .npmrc files) are not read; where a registry needs them, give
// the URL (and a Client) that reach it, or use npm through the scripts.
// Only https is used, save plain http to a loopback address (a server on
// this machine); redirects are followed to https alone, and a tarball above
// 1 GiB is refused.
//
// Every check comes before anything is installed: a tarball whose sha256
// is not the pin's is refused (ErrChecksum) and not kept; so is an archive
// with an entry whose path would leave the directory (ErrUnsafeArchive),
// that lacks the set's libraries or the LICENSE, or that unpacks to more
// than 4 GiB. Only regular files are written: links in the archive are
// neither created nor followed. The set is unpacked into a new directory
// beside dir/set and renamed into place, so a reader of dir/set sees the
// old set or the new one, whole.
func Install(ctx context.Context, set, dir string, opts InstallOptions) (Installed, error) {
	return defaultInstaller().install(ctx, set, dir, opts)
}

// installer is Install with its pin and its bounds.
type installer struct {
	pin        native.Pin
	maxTarball int64 // bytes a downloaded tarball may have
	maxArchive int64 // bytes a tarball may unpack to (the tar stream)
}

func defaultInstaller() installer {
	return installer{pin: native.Load(), maxTarball: 1 << 30, maxArchive: 4 << 30}
}

func (in installer) install(ctx context.Context, set, dir string, opts InstallOptions) (Installed, error) {
	sets := in.pin.Platforms()
	sort.Strings(sets)
	pkg, sha, ok := in.pin.Package(set)
	if !ok || !slices.Contains(sets, set) {
		return Installed{}, &InstallError{Set: set, Err: fmt.Errorf("no prebuilt package is pinned for it (pinned: %s; other platforms: scripts/build-native.sh)", strings.Join(sets, ", "))}
	}
	res := Installed{Set: set, Package: pkg + "@" + in.pin.NPMVersion}
	fail := func(err error) (Installed, error) {
		return Installed{}, &InstallError{Set: set, Package: res.Package, Err: err}
	}
	var reg registry
	if opts.Registry != "" {
		// an explicit registry is checked even when no download needs it
		var err error
		if reg, err = parseRegistry(opts.Registry, "as given"); err != nil {
			return fail(err)
		}
	}
	if dir == "" {
		d, err := cacheLibDir()
		if err != nil {
			return fail(fmt.Errorf("no directory given and no user cache to install into (set GGLOAD_CACHE): %v", err))
		}
		dir = d
	}
	res.Dir = filepath.Join(dir, set)
	stamp := res.Package + " " + sha
	if readStamp(res.Dir) == stamp {
		res.UpToDate = true
		return res, nil
	}
	tgz, from, err := in.tarball(ctx, pkg, sha, reg, opts)
	if err != nil {
		return fail(err)
	}
	defer tgz.Close()
	res.Tarball, res.URL = tgz.Name(), from
	if res.Files, err = in.place(tgz, set, dir, stamp); err != nil {
		return fail(fmt.Errorf("%s: %w", tgz.Name(), err))
	}
	return res, nil
}

// readStamp is the stamp of the set in dir, "" when it has none.
func readStamp(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, stampFile))
	if err != nil {
		return ""
	}
	return strings.TrimRight(string(b), "\n")
}

// PrebuiltSet is a pinned prebuilt set of this platform.
type PrebuiltSet struct {
	Name string // "linux-x64-vulkan"
	// Default: a program installs it when no set is named (ggload fetch).
	Default bool
	Why     string // why it is a default, or what it needs
}

// PrebuiltSets lists the pinned prebuilt sets of this platform (Platform),
// in name order, each with whether it is a default and why: the plain CPU
// set always; the Vulkan set where the Vulkan loader is installed; the CUDA
// set never, as it needs the CUDA 13 runtime beside the driver. The list is
// empty where no prebuilt set is pinned (macOS, Windows): there the sets
// are built from source (scripts/build-native.sh).
func PrebuiltSets() []PrebuiltSet {
	platform := Platform()
	var out []PrebuiltSet
	for _, name := range native.Load().Platforms() {
		variant, ok := strings.CutPrefix(name, platform)
		if !ok || variant != "" && variant[0] != '-' {
			continue
		}
		s := PrebuiltSet{Name: name}
		switch strings.TrimPrefix(variant, "-") {
		case "":
			s.Default, s.Why = true, "the CPU set"
		case "vulkan":
			if haveVulkanLoader() {
				s.Default, s.Why = true, "the Vulkan loader is installed"
			} else {
				s.Why = "needs the Vulkan loader, libvulkan.so.1, which is not installed"
			}
		case "cuda":
			s.Why = "needs the CUDA 13 runtime, libcudart.so.13 and libcublas.so.13: name it to install it"
		default:
			s.Why = "name it to install it"
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
