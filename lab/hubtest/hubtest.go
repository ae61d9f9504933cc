// Package hubtest serves model repositories on loopback as the Hugging
// Face Hub answers for them, for the tests of -hf (CI has no network):
// the API's refs and tree of a repository, and its files at
// /OWNER/NAME/resolve/REVISION/PATH, an LFS file redirected to a CDN of
// another origin with X-Linked-Etag and X-Linked-Size, as the hub does,
// ranges and HEAD answered as http.ServeContent answers them.
package hubtest

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// File is one file of a repository.
type File struct {
	Path string
	Data []byte
	// Git keeps the file in git, not LFS: its oid is its git blob's
	// sha1 and the hub serves it itself.
	Git bool
}

// Repo is a repository: its files on one branch.
type Repo struct {
	ID     string // OWNER/NAME
	Branch string // default main
	Files  []File
	// Private answers 401 to a request without the hub's Token.
	Private bool
}

// Hub is the loopback hub. Its fields may be changed between requests
// under Lock.
type Hub struct {
	URL   string // the endpoint, ending in "/" (MODEL_ENDPOINT)
	CDN   string // the CDN's origin
	Token string // the token private repositories take

	sync.Mutex
	repos map[string]Repo
	log   []string
	// Corrupt, when set, changes the bytes the CDN serves (a bad blob).
	Corrupt bool
	// Down answers 503 to every request of the API.
	Down bool
}

// New starts a hub serving repos, stopped when the test ends.
func New(t testing.TB, repos ...Repo) *Hub {
	t.Helper()
	h := &Hub{Token: "hf_" + strings.Repeat("abcdefghij", 4), repos: map[string]Repo{}}
	for _, r := range repos {
		h.repos[r.ID] = r
	}
	hub := httptest.NewServer(http.HandlerFunc(h.serveHub))
	cdn := httptest.NewServer(http.HandlerFunc(h.serveCDN))
	t.Cleanup(hub.Close)
	t.Cleanup(cdn.Close)
	h.URL, h.CDN = hub.URL+"/", cdn.URL
	return h
}

// Set replaces (or adds) a repository.
func (h *Hub) Set(r Repo) {
	h.Lock()
	h.repos[r.ID] = r
	h.Unlock()
}

// Requests is the log: "METHOD PATH auth|noauth" of every request to the
// hub and the CDN (the CDN's prefixed "cdn").
func (h *Hub) Requests() []string {
	h.Lock()
	defer h.Unlock()
	return append([]string(nil), h.log...)
}

// Commit is the commit a repository's branch points at: the hash of its
// files.
func Commit(r Repo) string {
	s := sha1.New()
	for _, f := range r.Files {
		fmt.Fprintf(s, "%s\x00%x\x00", f.Path, sha256.Sum256(f.Data))
	}
	return hex.EncodeToString(s.Sum(nil))
}

// SHA256 is a file's LFS oid.
func SHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// GitOID is a file's git blob sha1.
func GitOID(b []byte) string {
	s := sha1.New()
	fmt.Fprintf(s, "blob %d\x00", len(b))
	s.Write(b)
	return hex.EncodeToString(s.Sum(nil))
}

func (f File) oid() string {
	if f.Git {
		return GitOID(f.Data)
	}
	return SHA256(f.Data)
}

func (h *Hub) note(prefix string, r *http.Request) {
	auth := "noauth"
	if r.Header.Get("Authorization") != "" {
		auth = "auth"
	}
	h.Lock()
	h.log = append(h.log, strings.TrimSpace(prefix+" "+r.Method+" "+r.URL.RequestURI()+" "+auth))
	h.Unlock()
}

func jsonError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// repo finds the repository of path's first two segments and checks the
// request's token; rest is the path after them.
func (h *Hub) repo(w http.ResponseWriter, r *http.Request, path string) (Repo, string, bool) {
	seg := strings.SplitN(path, "/", 3)
	if len(seg) < 2 {
		jsonError(w, http.StatusNotFound, "Not Found")
		return Repo{}, "", false
	}
	h.Lock()
	repo, ok := h.repos[seg[0]+"/"+seg[1]]
	token := h.Token
	h.Unlock()
	if !ok {
		jsonError(w, http.StatusUnauthorized, "Repository not found")
		return Repo{}, "", false
	}
	if repo.Private && r.Header.Get("Authorization") != "Bearer "+token {
		jsonError(w, http.StatusUnauthorized, "Invalid credentials in Authorization header")
		return Repo{}, "", false
	}
	rest := ""
	if len(seg) == 3 {
		rest = seg[2]
	}
	return repo, rest, true
}

func (h *Hub) serveHub(w http.ResponseWriter, r *http.Request) {
	h.note("hub", r)
	path := strings.TrimPrefix(r.URL.Path, "/")
	if api, ok := strings.CutPrefix(path, "api/models/"); ok {
		h.Lock()
		down := h.Down
		h.Unlock()
		if down {
			jsonError(w, http.StatusServiceUnavailable, "Service Unavailable")
			return
		}
		repo, rest, ok := h.repo(w, r, api)
		if !ok {
			return
		}
		branch := repo.Branch
		if branch == "" {
			branch = "main"
		}
		commit := Commit(repo)
		switch {
		case rest == "refs":
			writeJSON(w, map[string]any{
				"branches":     []map[string]string{{"name": branch, "ref": "refs/heads/" + branch, "targetCommit": commit}},
				"converts":     []any{},
				"tags":         []any{},
				"pullRequests": nil,
			})
		case strings.HasPrefix(rest, "tree/"):
			rev := strings.TrimPrefix(rest, "tree/")
			if rev != commit && rev != branch {
				jsonError(w, http.StatusNotFound, "Invalid rev id: "+rev)
				return
			}
			writeJSON(w, tree(repo))
		default:
			jsonError(w, http.StatusNotFound, "Not Found")
		}
		return
	}
	repo, rest, ok := h.repo(w, r, path)
	if !ok {
		return
	}
	rev, file, ok := strings.Cut(strings.TrimPrefix(rest, "resolve/"), "/")
	if !ok || !strings.HasPrefix(rest, "resolve/") || rev != Commit(repo) && rev != repo.Branch && !(repo.Branch == "" && rev == "main") {
		jsonError(w, http.StatusNotFound, "Entry not found")
		return
	}
	for _, f := range repo.Files {
		if f.Path != file {
			continue
		}
		w.Header().Set("X-Repo-Commit", Commit(repo))
		if f.Git {
			w.Header().Set("ETag", `"`+f.oid()+`"`)
			http.ServeContent(w, r, f.Path, time.Time{}, bytes.NewReader(f.Data))
			return
		}
		w.Header().Set("X-Linked-Etag", `"`+f.oid()+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(f.Data)))
		w.Header().Set("ETag", `"`+GitOID([]byte("version https://git-lfs.github.com/spec/v1\noid sha256:"+f.oid()))+`"`)
		http.Redirect(w, r, h.CDN+"/repos/"+repo.ID+"/"+f.oid()+"?sig=x", http.StatusFound)
		return
	}
	jsonError(w, http.StatusNotFound, "Entry not found")
}

// serveCDN serves LFS blobs by their oid, to any request (a signed URL).
func (h *Hub) serveCDN(w http.ResponseWriter, r *http.Request) {
	h.note("cdn", r)
	oid := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	h.Lock()
	corrupt := h.Corrupt
	var data []byte
	for _, repo := range h.repos {
		for _, f := range repo.Files {
			if !f.Git && f.oid() == oid {
				data = f.Data
			}
		}
	}
	h.Unlock()
	if data == nil {
		http.NotFound(w, r)
		return
	}
	if corrupt {
		data = append([]byte(nil), data...)
		data[len(data)-1] ^= 0xff
	}
	w.Header().Set("ETag", `"`+oid+`"`)
	http.ServeContent(w, r, oid, time.Time{}, bytes.NewReader(data))
}

// tree is the API's recursive tree: directories, then files, as the hub
// lists them (LFS files with their lfs object).
func tree(r Repo) []map[string]any {
	dirs := map[string]bool{}
	var out []map[string]any
	for _, f := range r.Files {
		for d := f.Path; strings.Contains(d, "/"); {
			d = d[:strings.LastIndexByte(d, '/')]
			dirs[d] = true
		}
	}
	var names []string
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, d := range names {
		out = append(out, map[string]any{"type": "directory", "oid": GitOID([]byte(d)), "size": 0, "path": d})
	}
	for _, f := range r.Files {
		e := map[string]any{"type": "file", "oid": GitOID(f.Data), "size": len(f.Data), "path": f.Path}
		if !f.Git {
			e["oid"] = GitOID([]byte("lfs pointer " + f.oid()))
			e["lfs"] = map[string]any{"oid": f.oid(), "size": len(f.Data), "pointerSize": 134}
		}
		out = append(out, e)
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
