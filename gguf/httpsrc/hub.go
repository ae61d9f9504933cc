// Port of the Hugging Face parts of llama.cpp common/download.cpp and
// common/hf-cache.cpp (v0.5.0): -hf, -hff, -hft and --offline.

package httpsrc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// defaultEndpoint is the model hub llama.cpp asks when nothing names
// another (common_get_model_endpoint).
const defaultEndpoint = "https://huggingface.co/"

// HubEndpoint is the model hub's base URL, ending in "/", as
// common_get_model_endpoint reads it: $MODEL_ENDPOINT, else $HF_ENDPOINT,
// else the Hugging Face Hub.
func HubEndpoint() string {
	e := os.Getenv("MODEL_ENDPOINT")
	if e == "" {
		e = os.Getenv("HF_ENDPOINT")
	}
	if e == "" {
		return defaultEndpoint
	}
	if !strings.HasSuffix(e, "/") {
		e += "/"
	}
	return e
}

// ErrHub is wrapped by the errors of Pull: a repository name it cannot
// take, a repository that neither the hub nor the cache has, a file or a
// quantization the repository does not hold.
var ErrHub = errors.New("no such model on the hub")

// SplitRepoTag splits OWNER/NAME[:QUANT] as common_download_split_repo_tag
// does: the tag after the last colon ("" without one), the repository
// before the first, which must have one slash.
func SplitRepoTag(s string) (repo, tag string, err error) {
	parts := strings.Split(s, ":")
	if len(parts) > 1 {
		tag = parts[len(parts)-1]
	}
	repo = parts[0]
	if len(strings.Split(repo, "/")) != 2 {
		return "", "", fmt.Errorf("httpsrc: %q: %w: invalid HF repo format, expected <user>/<model>[:quant]", s, ErrHub)
	}
	return repo, tag, nil
}

// ParseRepo is SplitRepoTag, and the repository's name checked as
// llama.cpp checks it (is_valid_repo_id) before any request.
func ParseRepo(s string) (repo, tag string, err error) {
	if repo, tag, err = SplitRepoTag(s); err != nil {
		return "", "", err
	}
	if !validRepoID(repo) {
		return "", "", fmt.Errorf("httpsrc: %q: %w: not a repository name (OWNER/NAME of letters, digits, _, and ., - or / between them)", s, ErrHub)
	}
	return repo, tag, nil
}

// HubOptions are a Pull's: the requests' Options (Token: -hft, else
// $HF_TOKEN), and llama.cpp's choices of what to bring.
type HubOptions struct {
	Options
	// File is -hff: the repository's file to bring, by its path; ""
	// chooses by the tag.
	File string
	// Mmproj brings the repository's multimodal projector too, where it
	// has one (llama-server and llama-mtmd-cli do, unless --no-mmproj,
	// -mm or -mmu).
	Mmproj bool
	// Offline asks nothing of the hub: the cache must hold the files
	// (--offline).
	Offline bool
	// Endpoint is the hub's base URL; "": HubEndpoint().
	Endpoint string
	// Cache is the cache directory; "": HubCacheDir().
	Cache string
}

// HubModel is what Pull brought: the repository and tag asked for, the
// commit the files are of ("" when they came from the cache without the
// hub), the model's files (the first of a split model first) and the
// projector (""), each a path in the cache's snapshot.
type HubModel struct {
	Repo, Tag, Commit string
	Files             []string
	Mmproj            string
	// Listed is how the files were found: "hub" (the repository's tree
	// at its main branch), "cache" (offline, or the hub not reachable:
	// then Why says why).
	Listed, Why string
}

// Path is the model's first file: what loads it.
func (m *HubModel) Path() string { return m.Files[0] }

// Pull brings the model repoTag (OWNER/NAME[:QUANT]) names into the hub
// cache as llama.cpp's -hf does (common_download_get_hf_plan, then its
// downloads), and returns its local files:
//
//   - the repository's refs, then its tree at the main branch's commit
//     (else the first branch's), from the hub (HubEndpoint); where the hub
//     cannot be asked or answers no file, or Offline, the files of the
//     snapshot the cache's refs name;
//   - the file: -hff's (File), else the first model file whose name holds
//     the tag followed by . or - (case aside; default Q4_K_M, then Q8_0,
//     then the first model file), every split of it, and with Mmproj the
//     projector closest to it (its directory, then its quantization);
//   - each file brought to blobs/HASH (the tree's LFS sha256, else its git
//     sha1) unless it is there, as Download brings a file (one writer,
//     resumed, checked), then checked against that hash: a file whose
//     bytes are not the hash the tree gives is refused and removed;
//   - its snapshot entry, snapshots/COMMIT/PATH, made a relative symbolic
//     link to the blob, and refs/BRANCH the commit, as huggingface_hub
//     lays them out, so that either tool uses what the other brought.
//
// Offline, a file the cache lacks is an error naming it. The token goes
// to the hub's origin only, and to its API only when it has the Hugging
// Face form (hf_...), as llama.cpp sends it.
func Pull(ctx context.Context, repoTag string, o HubOptions) (*HubModel, error) {
	repo, tag, err := ParseRepo(repoTag)
	if err != nil {
		return nil, err
	}
	if o.Endpoint == "" {
		o.Endpoint = HubEndpoint()
	}
	if o.Cache == "" {
		if o.Cache, err = HubCacheDir(); err != nil {
			return nil, err
		}
	}
	m := &HubModel{Repo: repo, Tag: tag, Listed: "cache"}
	var all []HubFile
	if o.Offline {
		m.Why = "offline"
	} else if all, m.Commit, err = listRepo(ctx, repo, o); err == nil {
		m.Listed = "hub"
	} else {
		m.Why = err.Error()
		o.logger().Warn("httpsrc: the hub's list of the repository failed; looking in the cache", "repo", repo, "err", err)
	}
	if len(all) == 0 {
		all = cachedFiles(o.Cache, repo)
		m.Listed = "cache"
	}
	if len(all) == 0 {
		why := "the cache " + repoFolder(o.Cache, repo) + " holds no snapshot of it"
		if m.Why != "" {
			why = m.Why + ", and " + why
		}
		return nil, fmt.Errorf("httpsrc: %s: %w: %s", repo, ErrHub, why)
	}
	for _, f := range all {
		if f.Path == "preset.ini" {
			return nil, fmt.Errorf("httpsrc: %s: %w: the repository is a llama-server preset (preset.ini), which ggload does not run", repo, ErrHub)
		}
	}
	primary, err := choose(all, repo, tag, o.File)
	if err != nil {
		return nil, err
	}
	files := splitFiles(all, primary)
	var mmproj HubFile
	if o.Mmproj {
		mmproj = bestSibling(all, primary.Path, "mmproj", "")
	}
	fetch := append([]HubFile(nil), files...)
	if mmproj.Path != "" {
		fetch = append(fetch, mmproj)
	}
	for _, f := range fetch {
		if err := pullFile(ctx, f, o); err != nil {
			return nil, err
		}
	}
	m.Files = append(m.Files, primary.Final)
	for _, f := range files {
		if f.Path != primary.Path {
			m.Files = append(m.Files, f.Final)
		}
	}
	m.Mmproj = mmproj.Final
	return m, nil
}

// pullFile brings one file to its blob (or finds it there, or offline in
// the snapshot), then makes its snapshot entry.
func pullFile(ctx context.Context, f HubFile, o HubOptions) error {
	if o.Offline {
		if _, err := os.Stat(f.Local); err != nil {
			return &FileError{Path: f.Local, URL: f.URL, Err: fmt.Errorf("%w: offline, and the cache does not hold %s of %s", ErrHub, f.Path, f.Repo)}
		}
		return nil
	}
	if f.URL != "" {
		client, own := o.client()
		if own {
			defer client.CloseIdleConnections()
		}
		d := &download{url: f.URL, local: f.Local, tmp: f.Local + partialSuffix, client: client, o: o.Options, size: -1, h: newSum(), hub: true, oid: f.OID}
		if err := d.run(ctx); err != nil {
			return err
		}
	}
	if err := finalize(f); err != nil {
		return &FileError{Path: f.Final, URL: f.URL, Err: err}
	}
	return nil
}

// hubTreeMax bounds the JSON the hub's API may send (a tree of many
// thousand files is a few MiB).
const hubTreeMax = 64 << 20

// apiGet is api_get: a GET of the hub's API, its JSON decoded into v.
// The token goes only where it has the Hugging Face form.
func apiGet(ctx context.Context, rawURL string, o HubOptions, v any) error {
	ao := o.Options
	tok := ao.token()
	if !validHubToken(tok) {
		if tok != "" {
			ao.logger().Warn("httpsrc: the token is not a Hugging Face token (hf_...): the hub's API is asked without it")
		}
		ao.Token, ao.noToken = "", true
	}
	client, own := ao.client()
	if own {
		defer client.CloseIdleConnections()
	}
	rctx, cancel := context.WithTimeout(ctx, ao.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", Redact(rawURL), err)
	}
	setHeaders(req, ao)
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, hubTreeMax+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", Redact(rawURL), err)
	}
	if len(body) > hubTreeMax {
		return fmt.Errorf("GET %s: %w: the answer is longer than %d MiB", Redact(rawURL), ErrBadAnswer, hubTreeMax>>20)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(body))
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			msg += " (" + refused(resp.StatusCode).Error() + ")"
		}
		return fmt.Errorf("GET %s failed (%d): %s", Redact(rawURL), resp.StatusCode, msg)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w: %v", Redact(rawURL), ErrBadAnswer, err)
	}
	return nil
}

// listRepo is get_repo_files: the repository's commit (get_repo_commit:
// the main branch's, else the first valid branch's, kept in refs/), then
// the files of its tree at that commit, each with its URL, its blob and
// its snapshot path.
func listRepo(ctx context.Context, repo string, o HubOptions) ([]HubFile, string, error) {
	var refs struct {
		Branches []struct {
			Name         *string `json:"name"`
			TargetCommit *string `json:"targetCommit"`
		} `json:"branches"`
	}
	if err := apiGet(ctx, o.Endpoint+"api/models/"+repo+"/refs", o, &refs); err != nil {
		return nil, "", err
	}
	name, commit := "", ""
	for _, b := range refs.Branches {
		if b.Name == nil || b.TargetCommit == nil || !validSubpath(*b.Name) || !validCommit(*b.TargetCommit) {
			continue
		}
		if *b.Name == "main" {
			name, commit = *b.Name, *b.TargetCommit
			break
		}
		if name == "" {
			name, commit = *b.Name, *b.TargetCommit
		}
	}
	if commit == "" {
		return nil, "", fmt.Errorf("%w: the hub names no valid branch of %s", ErrBadAnswer, repo)
	}
	dir := repoFolder(o.Cache, repo)
	if err := writeRef(dir, name, commit); err != nil {
		return nil, "", &FileError{Path: dir, Err: err}
	}
	var tree []struct {
		Type *string `json:"type"`
		Path *string `json:"path"`
		OID  *string `json:"oid"`
		LFS  *struct {
			OID *string `json:"oid"`
		} `json:"lfs"`
	}
	if err := apiGet(ctx, o.Endpoint+"api/models/"+repo+"/tree/"+commit+"?recursive=true", o, &tree); err != nil {
		return nil, "", err
	}
	snap := dir + string(os.PathSeparator) + "snapshots" + string(os.PathSeparator) + commit
	var files []HubFile
	for _, it := range tree {
		if it.Type == nil || *it.Type != "file" || it.Path == nil {
			continue
		}
		f := HubFile{Repo: repo, Path: *it.Path}
		if !validSubpath(f.Path) {
			o.logger().Warn("httpsrc: the hub lists a file outside the repository: skipped", "repo", repo, "path", f.Path)
			continue
		}
		switch {
		case it.LFS != nil:
			if it.LFS.OID != nil {
				f.OID = *it.LFS.OID
			}
		case it.OID != nil:
			f.OID = *it.OID
		}
		if f.OID != "" && !validOID(f.OID) {
			o.logger().Warn("httpsrc: the hub gives a file a hash that is none: skipped", "repo", repo, "path", f.Path, "oid", f.OID)
			continue
		}
		f.OID = strings.ToLower(f.OID)
		f.URL = o.Endpoint + repo + "/resolve/" + commit + "/" + escapePath(f.Path)
		f.Final = joinSlash(snap, f.Path)
		f.Local = f.Final
		if _, err := os.Stat(f.Final); err != nil && f.OID != "" {
			f.Local = joinSlash(dir, "blobs/"+f.OID)
		}
		files = append(files, f)
	}
	return files, commit, nil
}

// joinSlash joins a directory and a slash-separated relative path.
func joinSlash(dir, rel string) string {
	return dir + string(os.PathSeparator) + strings.ReplaceAll(rel, "/", string(os.PathSeparator))
}

// escapePath escapes each segment of a repository path for a URL.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// choose is the model file asked for: -hff's path exactly, else
// find_best_model's by the tag. The error lists the repository's GGUF
// files, as llama.cpp's list_available_gguf_files does.
func choose(all []HubFile, repo, tag, file string) (HubFile, error) {
	if file != "" {
		for _, f := range all {
			if f.Path == file {
				return f, nil
			}
		}
		return HubFile{}, fmt.Errorf("httpsrc: %s: %w: file '%s' not found in repository%s", repo, ErrHub, file, available(all))
	}
	if f, ok := bestModel(all, tag); ok {
		return f, nil
	}
	what := "no GGUF files found in repository"
	if tag != "" {
		what = fmt.Sprintf("no model file of quantization %s in repository", tag)
	}
	return HubFile{}, fmt.Errorf("httpsrc: %s: %w: %s%s", repo, ErrHub, what, available(all))
}

// available lists the GGUF files of the repository.
func available(all []HubFile) string {
	var b strings.Builder
	for _, f := range all {
		if strings.HasSuffix(f.Path, ".gguf") {
			b.WriteString("\n - " + f.Path)
		}
	}
	if b.Len() == 0 {
		return " (it holds no GGUF file)"
	}
	return "; available GGUF files:" + b.String()
}

// isModelFile is gguf_filename_is_model: a GGUF file that is no
// projector, importance matrix or speculative decoder's head.
func isModelFile(p string) bool {
	if !strings.HasSuffix(p, ".gguf") {
		return false
	}
	name := p[strings.LastIndexByte(p, '/')+1:]
	for _, k := range []string{"mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"} {
		if strings.Contains(name, k) {
			return false
		}
	}
	return true
}

// bestModel is find_best_model: the first model file (the first split of a
// split one) whose path holds the tag followed by . or -, ignoring case;
// without a tag, Q4_K_M, then Q8_0, then the first model file.
func bestModel(all []HubFile, tag string) (HubFile, bool) {
	tags := []string{tag}
	if tag == "" {
		tags = []string{"Q4_K_M", "Q8_0"}
	}
	first := func(match func(string) bool) (HubFile, bool) {
		for _, f := range all {
			if isModelFile(f.Path) && match(f.Path) {
				if s := splitOf(f.Path); s.count > 1 && s.index != 1 {
					continue
				}
				return f, true
			}
		}
		return HubFile{}, false
	}
	for _, t := range tags {
		re, err := regexp.Compile("(?i)" + t + "[.-]")
		if err != nil {
			re = regexp.MustCompile("(?i)" + regexp.QuoteMeta(t) + "[.-]")
		}
		if f, ok := first(re.MatchString); ok {
			return f, true
		}
	}
	if tag == "" {
		return first(func(string) bool { return true })
	}
	return HubFile{}, false
}

// splitInfo is gguf_split_info: a GGUF path's name without .gguf and
// without its split suffix (the tag kept), its tag upper-cased, and its
// split's number and count (1 of 1 when it is not split).
type splitInfo struct {
	prefix, tag  string
	index, count int
}

var (
	splitSuffix = regexp.MustCompile(`(?i)^(.+)-([0-9]{5})-of-([0-9]{5})$`)
	quantTag    = regexp.MustCompile(`(?i)[-.]([A-Z0-9_]+)$`)
)

// splitOf is get_gguf_split_info.
func splitOf(p string) splitInfo {
	prefix, ok := strings.CutSuffix(p, ".gguf")
	if !ok {
		return splitInfo{}
	}
	s := splitInfo{prefix: prefix, index: 1, count: 1}
	if m := splitSuffix.FindStringSubmatch(prefix); m != nil {
		s.index, _ = strconv.Atoi(m[2])
		s.count, _ = strconv.Atoi(m[3])
		s.prefix = m[1]
	}
	if m := quantTag.FindStringSubmatch(s.prefix); m != nil {
		s.tag = strings.ToUpper(m[1])
	}
	return s
}

// quantBits is extract_quant_bits: the number the tag's first digits
// make (Q4_K_M 4, F16 16), 0 without digits.
func quantBits(p string) int { return leadingBits(splitOf(p).tag) }

func leadingBits(tag string) int {
	i := strings.IndexAny(tag, "0123456789")
	if i < 0 {
		return 0
	}
	j := i
	for j < len(tag) && tag[j] >= '0' && tag[j] <= '9' {
		j++
	}
	n, _ := strconv.Atoi(tag[i:j])
	return n
}

// splitFiles is get_split_files: every split of the file's model (its
// prefix and count), in the tree's order; the file alone if not split.
func splitFiles(all []HubFile, f HubFile) []HubFile {
	s := splitOf(f.Path)
	if s.count <= 1 {
		return []HubFile{f}
	}
	var out []HubFile
	for _, g := range all {
		if t := splitOf(g.Path); t.count == s.count && t.prefix == s.prefix {
			out = append(out, g)
		}
	}
	return out
}

// bestSibling is find_best_sibling: of the GGUF files whose path holds
// keyword and whose directory is the model's or one above it, the
// deepest, then one whose name holds -TAG. (with a tag), then the one
// whose quantization's bits are closest to the tag's, or else the
// model's.
func bestSibling(all []HubFile, model, keyword, tag string) HubFile {
	tagUpper := strings.ToUpper(tag)
	modelBits := quantBits(model)
	if tagUpper != "" {
		modelBits = leadingBits(tagUpper)
	}
	modelParts := strings.Split(model, "/")
	modelDirs := modelParts[:len(modelParts)-1]
	var best HubFile
	bestDepth, bestDiff, bestExact, found := 0, 0, false, false
	for _, f := range all {
		if !strings.HasSuffix(f.Path, ".gguf") || !strings.Contains(f.Path, keyword) {
			continue
		}
		sibParts := strings.Split(f.Path, "/")
		sibDirs := sibParts[:len(sibParts)-1]
		d := 0
		for d < len(modelDirs) && d < len(sibDirs) && modelDirs[d] == sibDirs[d] {
			d++
		}
		if d != len(sibDirs) {
			continue
		}
		diff := quantBits(f.Path) - modelBits
		if diff < 0 {
			diff = -diff
		}
		exact := tagUpper != "" && strings.Contains(strings.ToUpper(f.Path), "-"+tagUpper+".")
		if !found || d > bestDepth || d == bestDepth && exact && !bestExact || d == bestDepth && exact == bestExact && diff < bestDiff {
			best, bestDepth, bestDiff, bestExact, found = f, d, diff, exact, true
		}
	}
	return best
}
