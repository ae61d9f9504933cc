package synth

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/ggload/ggload/gguf"
)

// Some projector types build graphs whose arithmetic the warm-up's
// refusals do not teach: a layer the graph reads by its index, a size
// the graph takes for granted (a fixed grid of patches, a fixed number
// of frames after a convolution's stride), a hyperparameter that must
// divide another. For these, a preset gives the projector what a small
// but consistent model of the type has, before Warm learns the rest.

// warmPreset is what a type's projector is given before its warm-up.
type warmPreset struct {
	layers int       // block_count (0: the default)
	embd   int64     // the encoder's width (0: the default)
	keys   []gguf.KV // metadata set before the warm-up
	// shapes are tensors' shapes; a name with "%d" stands for every
	// block's tensor of that name
	shapes map[string][]int64
	// fixedGeometry: the preset's image and patch sizes are the only
	// ones the graph accepts, not to be traded for others
	fixedGeometry bool
	// drop matches tensors the type's projector does not have (optional
	// ones the loader would take)
	drop *regexp.Regexp
}

// warmPresets are the presets by projector type.
var warmPresets = map[string]warmPreset{
	// the graph takes a skip connection from the third block's output;
	// its blocks' feed-forward is dense (no experts)
	"mimo_audio": {layers: 3, drop: regexp.MustCompile(`_exps\.|exp_probs_b\.`)},
	// its audio front end reads the mel filter bank (16 bins of the
	// 512-point FFT's 257) and the 400-sample window from the file
	"parakeet": {keys: oneHead, shapes: with(conformerShapes(3), map[string][]int64{
		"a.mel_filters": {257 * 16},
		"a.window":      {400},
	})},
	// the depthwise convolution's input padded by 4 on each side: a
	// kernel 9 wide keeps the frames
	"lfm2a": {keys: oneHead, shapes: conformerShapes(9)},
	// two stride-2 convolutions (16 mel bins → 4) over 8 channels, whose
	// output rows (4 bins × 8 channels) the input projection takes, and a
	// causal depthwise convolution padded by 4: a kernel 5 wide
	"gemma4a": {shapes: map[string][]int64{
		"a.conv1d.0.weight":         {3, 3, 1, 8},
		"a.conv1d.1.weight":         {3, 3, 8, 8},
		"a.conv1d.0.bias":           {1, 1, 8},
		"a.conv1d.1.bias":           {1, 1, 8},
		"a.conv1d.0.norm.weight":    {8},
		"a.conv1d.1.norm.weight":    {8},
		"a.input_projection.weight": {32, 32},
		"a.blk.%d.conv_pw1.weight":  {32, 64},
		"a.blk.%d.conv_dw.weight":   {5, 32},
		"a.blk.%d.conv_dw.bias":     {32},
		"a.blk.%d.conv_norm.weight": {32},
		"a.blk.%d.norm_conv.weight": {32},
		"a.blk.%d.conv_pw2.weight":  {32, 32},
	}},
	// position embeddings as two tables, one per axis, one after the
	// other
	"gemma4v": {shapes: map[string][]int64{"v.position_embd.weight": {32, 64, 2}}},
	// and patches of 3×3 merged patches (8 pixels square), whose pixels
	// (24×24×3) a matrix embeds
	"gemma4uv": {shapes: map[string][]int64{
		"v.position_embd.weight": {32, 64, 2},
		"v.patch_embd.weight":    {24 * 24 * 3, 32},
		"v.patch_embd.bias":      {32},
		"v.patch_norm.1.weight":  {24 * 24 * 3},
		"v.patch_norm.1.bias":    {24 * 24 * 3},
		"v.patch_norm.2.weight":  {32},
		"v.patch_norm.2.bias":    {32},
	}, fixedGeometry: true},
	// a 2×2 stride-2 convolution merging patches to 64 channels, a 1×1
	// one, a row-end embedding of those channels, a projection of them
	"hunyuanvl": {shapes: map[string][]int64{
		"mm.0.weight":         {2, 2, 32, 64},
		"mm.0.bias":           {64},
		"mm.2.weight":         {1, 1, 64, 64},
		"mm.2.bias":           {64},
		"v.image_newline":     {64},
		"mm.pre_norm.weight":  {32},
		"mm.post_norm.weight": {32},
	}},
	// the patches (8 pixels square, 3 channels) cut by reshapes and
	// embedded by a matrix
	"youtuvl": {shapes: map[string][]int64{"v.patch_embd.weight": {8 * 8 * 3, 32}}, fixedGeometry: true},
	// a resampler whose attention has heads 128 wide: its width (the
	// projection's input, 128) one head, 16 queries
	"resampler": {
		keys: []gguf.KV{{Key: "clip.minicpmv_query_num", Value: gguf.Uint32(16)}},
		shapes: map[string][]int64{
			"resampler.query":           {128, 16},
			"resampler.kv.weight":       {32, 128},
			"resampler.ln_q.weight":     {128},
			"resampler.ln_q.bias":       {128},
			"resampler.ln_kv.weight":    {128},
			"resampler.ln_kv.bias":      {128},
			"resampler.ln_post.weight":  {128},
			"resampler.ln_post.bias":    {128},
			"resampler.attn.q.weight":   {128, 128},
			"resampler.attn.k.weight":   {128, 128},
			"resampler.attn.v.weight":   {128, 128},
			"resampler.attn.q.bias":     {128},
			"resampler.attn.k.bias":     {128},
			"resampler.attn.v.bias":     {128},
			"resampler.attn.out.weight": {128, 128},
			"resampler.attn.out.bias":   {128},
			"resampler.proj.weight":     {128, 128},
		},
	},
	// a conformer whose attention is relative within chunks of 2
	// frames: a relative position embedding of a head's width (8) per
	// distance (2·max_pos_emb+1); its convolution module as above, a
	// kernel 3 wide
	"granite_speech": {shapes: map[string][]int64{
		"a.blk.%d.attn_rel_pos_emb": {8, 5},
		"a.blk.%d.conv_pw1.weight":  {32, 64},
		"a.blk.%d.conv_pw1.bias":    {64},
		"a.blk.%d.conv_dw.weight":   {3, 32},
		"a.blk.%d.conv_norm.weight": {32},
		"a.blk.%d.conv_norm.bias":   {32},
		"a.blk.%d.norm_conv.weight": {32},
		"a.blk.%d.norm_conv.bias":   {32},
		"a.blk.%d.conv_pw2.weight":  {32, 32},
		"a.blk.%d.conv_pw2.bias":    {32},
	}},
	// an ECAPA speaker encoder, whose graph takes three blocks for
	// granted: 16 channels, split by each block's Res2Net into 8 of 2;
	// its 1-d kernels are [width, channels in, channels out]
	"qwen3tts_spkenc": {layers: 3, shapes: spkencShapes()},
	// a Q-Former whose attention has heads 64 wide: a width of 64
	"granite4_vision": {embd: 64},
	// SAM takes a 1024×1024 image: 64-pixel patches (a 16×16 grid, one
	// window of 16), a neck and two stride-2 convolutions down to 4×4
	// patches of the ViT's width (32), whose output and SAM's are
	// projected together
	"deepseekocr": {
		keys: samKeys(16),
		shapes: samShapes(64, map[string][]int64{
			"v.position_embd.weight": {32, 4*4 + 1},
			"v.class_embd":           {32},
			"mm.model.fc.weight":     {64, 32},
			"mm.model.fc.bias":       {32},
			"v.image_newline":        {32},
			"v.view_seperator":       {32},
		}),
	},
	// its second version's resampler takes 256 tokens (or 144) from SAM:
	// 16-pixel patches (64×64, in windows of 16) down to 16×16
	"deepseekocr2": {
		keys: samKeys(16),
		shapes: samShapes(16, map[string][]int64{
			"v.resample_query_1024.weight": {32, 256},
			"mm.model.fc.weight":           {32, 32},
			"mm.model.fc.bias":             {32},
			"v.view_seperator":             {32},
		}),
	},
	// the patch embedding is both a kernel and a matrix: as a matrix
	"llama4": {shapes: map[string][]int64{"v.patch_embd.weight": {8 * 8 * 3, 32}}, fixedGeometry: true},
}

// samKeys are a SAM encoder's: one windowed block 16 wide, of 2 heads,
// in windows of window patches.
func samKeys(window uint32) []gguf.KV {
	return []gguf.KV{
		{Key: "clip.vision.sam.block_count", Value: gguf.Uint32(1)},
		{Key: "clip.vision.sam.head_count", Value: gguf.Uint32(2)},
		{Key: "clip.vision.sam.embedding_length", Value: gguf.Uint32(16)},
		{Key: "clip.vision.window_size", Value: gguf.Uint32(window)},
	}
}

// samShapes are a SAM encoder's tensors (as samKeys, on 1024×1024
// images cut in patches patch pixels square) with more, the rest's: its
// relative position embeddings span a window of 16 (31 distances), its
// neck keeps 16 channels, its last convolutions give 32, then 32.
func samShapes(patch int64, more map[string][]int64) map[string][]int64 {
	const c, d = 16, 8 // width, a head's
	m := map[string][]int64{
		"v.sam.patch_embd.weight":        {patch, patch, 3, c},
		"v.sam.patch_embd.bias":          {c},
		"v.sam.pos_embd.weight":          {c, 1024 / patch, 1024 / patch},
		"v.sam.blk.%d.attn.qkv.weight":   {c, 3 * c},
		"v.sam.blk.%d.attn.qkv.bias":     {3 * c},
		"v.sam.blk.%d.attn.out.weight":   {c, c},
		"v.sam.blk.%d.attn.out.bias":     {c},
		"v.sam.blk.%d.pre_ln.weight":     {c},
		"v.sam.blk.%d.pre_ln.bias":       {c},
		"v.sam.blk.%d.post_ln.weight":    {c},
		"v.sam.blk.%d.post_ln.bias":      {c},
		"v.sam.blk.%d.attn.pos_h.weight": {d, 2*16 - 1},
		"v.sam.blk.%d.attn.pos_w.weight": {d, 2*16 - 1},
		"v.sam.blk.%d.mlp.lin1.weight":   {c, 2 * c},
		"v.sam.blk.%d.mlp.lin1.bias":     {2 * c},
		"v.sam.blk.%d.mlp.lin2.weight":   {2 * c, c},
		"v.sam.blk.%d.mlp.lin2.bias":     {c},
		"v.sam.neck.0.weight":            {1, 1, c, 16},
		"v.sam.neck.1.weight":            {16},
		"v.sam.neck.1.bias":              {16},
		"v.sam.neck.2.weight":            {3, 3, 16, 16},
		"v.sam.neck.3.weight":            {16},
		"v.sam.neck.3.bias":              {16},
		"v.sam.net_2.weight":             {3, 3, 16, 32},
		"v.sam.net_3.weight":             {3, 3, 32, 32},
	}
	return with(m, more)
}

// with is m with more's shapes added.
func with(m, more map[string][]int64) map[string][]int64 {
	maps.Copy(m, more)
	return m
}

// spkencShapes are an ECAPA speaker encoder's: a stem over 16 mel bins,
// three SE-Res2Net blocks of 16 channels (squeezed to 8), their outputs
// aggregated (48), pooled by attentive statistics (mean and deviation:
// 96) and projected to 32.
func spkencShapes() map[string][]int64 {
	m := map[string][]int64{
		"a.conv1d.0.weight":        {5, 16, 16},
		"a.conv1d.0.bias":          {16},
		"a.conv_out.weight":        {1, 48, 48},
		"a.conv_out.bias":          {48},
		"a.asp_tdnn.weight":        {1, 3 * 48, 16},
		"a.asp_tdnn.bias":          {16},
		"a.asp_attn.weight":        {1, 16, 48},
		"a.asp_attn.bias":          {48},
		"mm.a.fc.weight":           {1, 96, 32},
		"mm.a.fc.bias":             {32},
		"a.blk.%d.conv_pw1.weight": {1, 16, 16},
		"a.blk.%d.conv_pw1.bias":   {16},
		"a.blk.%d.conv_pw2.weight": {1, 16, 16},
		"a.blk.%d.conv_pw2.bias":   {16},
		"a.blk.%d.se_conv1.weight": {1, 16, 8},
		"a.blk.%d.se_conv1.bias":   {8},
		"a.blk.%d.se_conv2.weight": {1, 8, 16},
		"a.blk.%d.se_conv2.bias":   {16},
	}
	for i := range 7 {
		m[fmt.Sprintf("a.blk.%%d.res2.%d.weight", i)] = []int64{3, 2, 2}
		m[fmt.Sprintf("a.blk.%%d.res2.%d.bias", i)] = []int64{2}
	}
	return m
}

// oneHead is an audio encoder's single attention head: the warm-up's
// frames are many, the scores of their pairs per head large.
var oneHead = []gguf.KV{{Key: "clip.audio.attention.head_count", Value: gguf.Uint32(1)}}

// conformerShapes are a conformer's subsampling (16 mel bins → 2 after
// three stride-2 convolutions, over 8 channels, whose output rows of 2
// bins × 8 channels the input projection takes) and its blocks'
// convolution module (a gated unit that halves a doubled width, a
// depthwise kernel k wide, a batch norm of the width), its attention's
// position biases those of one head.
func conformerShapes(k int64) map[string][]int64 {
	return map[string][]int64{
		"a.conv1d.0.weight":         {3, 3, 1, 8},
		"a.conv1d.2.weight":         {3, 3, 1, 8},
		"a.conv1d.3.weight":         {1, 1, 8, 8},
		"a.conv1d.5.weight":         {3, 3, 1, 8},
		"a.conv1d.6.weight":         {1, 1, 8, 8},
		"a.conv1d.0.bias":           {1, 1, 8},
		"a.conv1d.2.bias":           {1, 1, 8},
		"a.conv1d.3.bias":           {1, 1, 8},
		"a.conv1d.5.bias":           {1, 1, 8},
		"a.conv1d.6.bias":           {1, 1, 8},
		"a.pre_encode.out.weight":   {16, 32},
		"a.blk.%d.conv_pw1.weight":  {32, 64},
		"a.blk.%d.conv_pw1.bias":    {64},
		"a.blk.%d.conv_dw.weight":   {k, 32},
		"a.blk.%d.conv_dw.bias":     {32},
		"a.blk.%d.conv_norm_mean":   {32},
		"a.blk.%d.conv_norm_var":    {32},
		"a.blk.%d.conv_norm.weight": {32},
		"a.blk.%d.conv_norm.bias":   {32},
		"a.blk.%d.conv_pw2.weight":  {32, 32},
		"a.blk.%d.pos_bias_u":       {32, 1},
		"a.blk.%d.pos_bias_v":       {32, 1},
	}
}

// WarmProjectorOptions are the options to synthesize a projector of type
// typ with, for Warm to warm up.
func WarmProjectorOptions(typ string) ProjectorOptions {
	pr := warmPresets[typ]
	// the encoder's blocks keep its width
	return ProjectorOptions{Layers: pr.layers, Embd: pr.embd, ProjDim: pr.embd}
}

// applyPreset gives p its type's preset keys.
func (p *Projector) applyPreset() {
	pr, ok := warmPresets[p.Type]
	if !ok {
		return
	}
	for _, kv := range pr.keys {
		p.set(kv.Key, kv.Value)
	}
	p.Log = append(p.Log, "preset "+p.Type)
}

// presetShapes gives p's tensors their type's preset shapes, adding
// those the file lacks (but a block's, named by pattern).
func (p *Projector) presetShapes() {
	pr := warmPresets[p.Type]
	if pr.drop != nil {
		p.Tensors = slices.DeleteFunc(p.Tensors, func(t ArchTensor) bool { return pr.drop.MatchString(t.Name) })
	}
	for _, name := range slices.Sorted(maps.Keys(pr.shapes)) {
		if !strings.Contains(name, "%d") && !p.has(name) {
			p.Tensors = append(p.Tensors, ArchTensor{Name: name, Type: projectorTensorType(name), Shape: pr.shapes[name]})
			p.Log = append(p.Log, "preset tensor "+name)
		}
	}
	for i := range p.Tensors {
		t := &p.Tensors[i]
		if ne, ok := pr.shapes[t.Name]; ok {
			t.Shape = ne
			continue
		}
		if ne, ok := pr.shapes[blockPattern(t.Name)]; ok {
			t.Shape = ne
		}
	}
}

var reBlock = regexp.MustCompile(`\.blk\.\d+\.`)

// blockPattern is a block's tensor name with its block's index as "%d".
func blockPattern(name string) string {
	return reBlock.ReplaceAllString(name, ".blk.%d.")
}
