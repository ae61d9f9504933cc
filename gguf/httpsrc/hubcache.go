// Port of llama.cpp common/hf-cache.cpp (v0.5.0): the Hugging Face hub
// cache that llama.cpp and huggingface_hub share.

package httpsrc

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// HubCacheDir is the Hugging Face hub cache (hf_cache::get_cache_directory):
// $LLAMA_CACHE, $HF_HUB_CACHE, $HUGGINGFACE_HUB_CACHE, $HF_HOME/hub,
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub (on
// Windows under %USERPROFILE%): the first that is set. llama.cpp and
// huggingface_hub keep their downloads there, one folder per repository
// (models--OWNER--NAME) holding blobs/ (each file once, named by its hash),
// snapshots/COMMIT/ (the repository's tree at a commit, each file a
// symbolic link into blobs/) and refs/ (each branch's commit), so that a
// model either one downloaded is the other's too.
func HubCacheDir() (string, error) {
	home := "HOME"
	if runtime.GOOS == "windows" {
		home = "USERPROFILE"
	}
	for _, e := range []struct{ env, sub string }{
		{"LLAMA_CACHE", ""},
		{"HF_HUB_CACHE", ""},
		{"HUGGINGFACE_HUB_CACHE", ""},
		{"HF_HOME", "hub"},
		{"XDG_CACHE_HOME", filepath.Join("huggingface", "hub")},
		{home, filepath.Join(".cache", "huggingface", "hub")},
	} {
		if v := os.Getenv(e.env); v != "" {
			return filepath.Join(v, e.sub), nil
		}
	}
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return filepath.Join(h, ".cache", "huggingface", "hub"), nil
	}
	return "", errors.New("httpsrc: no Hugging Face cache directory: set HF_HUB_CACHE or HF_HOME")
}

// repoFolder is a repository's folder in the cache (repo_to_folder_name).
func repoFolder(cache, repo string) string {
	return filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

// validRepoID is is_valid_repo_id: OWNER/NAME, of [A-Za-z0-9_] with /, .
// and - each between two of them, exactly one /, at most 256 bytes.
func validRepoID(id string) bool {
	if id == "" || len(id) > 256 {
		return false
	}
	slashes, special := 0, true
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case isAlnum(c) || c == '_':
			special = false
		case c == '/' || c == '.' || c == '-':
			if special {
				return false
			}
			if c == '/' {
				slashes++
			}
			special = true
		default:
			return false
		}
	}
	return !special && slashes == 1
}

func isAlnum(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// validCommit is is_valid_commit: 40 hex digits.
func validCommit(s string) bool { return isHex(s, 40) }

// validOID is is_valid_oid: a git blob's sha1 or an LFS file's sha256.
func validOID(s string) bool { return isHex(s, 40) || isHex(s, 64) }

// validHubToken is is_valid_hf_token: hf_ and at least 34 letters and
// digits, 256 bytes at most. llama.cpp sends no other token to the API.
func validHubToken(tok string) bool {
	if len(tok) < 37 || len(tok) > 256 || !strings.HasPrefix(tok, "hf_") {
		return false
	}
	for i := 3; i < len(tok); i++ {
		if !isAlnum(tok[i]) {
			return false
		}
	}
	return true
}

// validSubpath is is_valid_subpath for the names a hub gives (a branch, a
// file's path): relative, and inside its directory once cleaned.
func validSubpath(p string) bool {
	return p != "" && !strings.Contains(p, "\x00") && filepath.IsLocal(filepath.FromSlash(p))
}

// HubFile is one file of a repository at a commit: its path in the
// repository, its URL, the hash that names its blob (an LFS file's sha256,
// else its git blob's sha1; "" when the hub gave none), where a download
// writes it (the blob, or the snapshot where there is no hash) and where
// it is used from (the snapshot).
type HubFile struct {
	Repo, Path, URL, OID string
	Local, Final         string
}

// writeRef keeps a branch's commit in refs/ (safe_write_file: a new file,
// then a rename), as both llama.cpp and huggingface_hub read it.
func writeRef(repoDir, branch, commit string) error {
	path := filepath.Join(repoDir, "refs", filepath.FromSlash(branch))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return writeSide(path, commit)
}

// cachedRef is get_cached_ref: the commit refs/main names, else the first
// other branch's (by name), of the refs that hold a commit.
func cachedRef(repoDir string) string {
	entries, err := os.ReadDir(filepath.Join(repoDir, "refs"))
	if err != nil {
		return ""
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	fallback := ""
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		text, err := readSide(filepath.Join(repoDir, "refs", e.Name()))
		commit, _, _ := strings.Cut(text, "\n")
		if err != nil || !validCommit(commit) {
			continue
		}
		if e.Name() == "main" {
			return commit
		}
		if fallback == "" {
			fallback = commit
		}
	}
	return fallback
}

// cachedFiles is get_cached_files for one repository: the files of the
// snapshot its ref names, each to be used where it is.
func cachedFiles(cache, repo string) []HubFile {
	dir := repoFolder(cache, repo)
	commit := cachedRef(dir)
	if commit == "" {
		return nil
	}
	snap := filepath.Join(dir, "snapshots", commit)
	if st, err := os.Stat(snap); err != nil || !st.IsDir() {
		return nil
	}
	var files []HubFile
	filepath.WalkDir(snap, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		rel, err := filepath.Rel(snap, p)
		if err != nil || rel == "." {
			return nil
		}
		files = append(files, HubFile{Repo: repo, Path: filepath.ToSlash(rel), Local: p, Final: p})
		return nil
	})
	return files
}

// finalize is finalize_file: the file's snapshot entry made a relative
// symbolic link to its blob (../../blobs/OID, as huggingface_hub makes
// them); where links cannot be made, the blob moved there, else copied.
// An entry that is there and leads to a file is kept; a dangling link is
// replaced.
func finalize(f HubFile) error {
	if f.Local == f.Final {
		return nil
	}
	if _, err := os.Stat(f.Final); err == nil {
		return nil
	}
	if _, err := os.Stat(f.Local); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.Final), 0o755); err != nil {
		return err
	}
	if st, err := os.Lstat(f.Final); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		os.Remove(f.Final) // dangling: its blob is gone
	}
	target, err := filepath.Rel(filepath.Dir(f.Final), f.Local)
	if err == nil {
		if err = os.Symlink(target, f.Final); err == nil {
			return nil
		}
	}
	if err := os.Rename(f.Local, f.Final); err == nil {
		return nil
	}
	return copyFile(f.Local, f.Final)
}

// copyFile copies src to a new file dst, through a temporary file beside
// it.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(out.Name(), dst)
	}
	if err != nil {
		os.Remove(out.Name())
		return fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	return nil
}
