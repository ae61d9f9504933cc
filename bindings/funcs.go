// Port of llama.cpp ggml/include/ggml.h, ggml/include/ggml-backend.h,
// ggml/include/ggml-cpu.h, ggml/include/ggml-rpc.h and ggml/include/gguf.h
// (v0.5.0): the functions' signatures.

package bindings

import "unsafe"

// Funcs is the table of native entry points. Each field's tag names the C
// symbol; Open fills every field once. Fields tagged `opt` may be absent from
// a build (they are left nil).
type Funcs struct {
	// version and log
	Version func() string                 `c:"ggml_version"`
	Commit  func() string                 `c:"ggml_commit"`
	LogSet  func(cb uintptr, ud uintptr)  `c:"ggml_log_set"`
	OpName  func(op int32) string         `c:"ggml_op_name"`
	OpDesc  func(t *Tensor) string        `c:"ggml_op_desc"`
	Abort   func(file string, line int32) `c:"ggml_abort" opt:"1"`

	// type traits (used by tests to check the pure-Go table)
	TypeName             func(typ int32) string                                                                                   `c:"ggml_type_name"`
	BlckSize             func(typ int32) int64                                                                                    `c:"ggml_blck_size"`
	TypeSize             func(typ int32) uintptr                                                                                  `c:"ggml_type_size"`
	RowSize              func(typ int32, ne int64) uintptr                                                                        `c:"ggml_row_size"`
	IsQuantized          func(typ int32) bool                                                                                     `c:"ggml_is_quantized"`
	NBytes               func(t *Tensor) uintptr                                                                                  `c:"ggml_nbytes"`
	NElements            func(t *Tensor) int64                                                                                    `c:"ggml_nelements"`
	NRows                func(t *Tensor) int64                                                                                    `c:"ggml_nrows"`
	IsContiguous         func(t *Tensor) bool                                                                                     `c:"ggml_is_contiguous"`
	ValidateRow          func(typ int32, data unsafe.Pointer, n uintptr) bool                                                     `c:"ggml_validate_row_data"`
	QuantizeInit         func(typ int32)                                                                                          `c:"ggml_quantize_init"`
	QuantizeNeedsImatrix func(typ int32) bool                                                                                     `c:"ggml_quantize_requires_imatrix"`
	QuantizeChunk        func(typ int32, src *float32, dst unsafe.Pointer, start, nrows, nPerRow int64, imatrix *float32) uintptr `c:"ggml_quantize_chunk"`
	FP16ToFP32Row        func(src unsafe.Pointer, dst *float32, n int64)                                                          `c:"ggml_fp16_to_fp32_row"`
	FP32ToFP16Row        func(src *float32, dst unsafe.Pointer, n int64)                                                          `c:"ggml_fp32_to_fp16_row"`

	// contexts and tensors
	Init                func(p InitParams) Context                                   `c:"ggml_init"`
	Free                func(ctx Context)                                            `c:"ggml_free"`
	TensorOverhead      func() uintptr                                               `c:"ggml_tensor_overhead"`
	GraphOverhead       func() uintptr                                               `c:"ggml_graph_overhead"`
	GraphOverheadCustom func(size uintptr, grads bool) uintptr                       `c:"ggml_graph_overhead_custom"`
	UsedMem             func(ctx Context) uintptr                                    `c:"ggml_used_mem"`
	GetMemSize          func(ctx Context) uintptr                                    `c:"ggml_get_mem_size"`
	GetMaxTensorSize    func(ctx Context) uintptr                                    `c:"ggml_get_max_tensor_size"`
	NewTensor           func(ctx Context, typ int32, ndims int32, ne *int64) *Tensor `c:"ggml_new_tensor"`
	GetFirstTensor      func(ctx Context) *Tensor                                    `c:"ggml_get_first_tensor"`
	GetNextTensor       func(ctx Context, t *Tensor) *Tensor                         `c:"ggml_get_next_tensor"`
	GetTensor           func(ctx Context, name string) *Tensor                       `c:"ggml_get_tensor"`
	SetName             func(t *Tensor, name string) *Tensor                         `c:"ggml_set_name"`
	GetName             func(t *Tensor) string                                       `c:"ggml_get_name"`
	SetInput            func(t *Tensor)                                              `c:"ggml_set_input"`
	SetOutput           func(t *Tensor)                                              `c:"ggml_set_output"`

	// ops (the supports_op probes and what applications compute with)
	GetRows        func(ctx Context, a, b *Tensor) *Tensor                                                                                                                                `c:"ggml_get_rows"`
	MulMat         func(ctx Context, a, b *Tensor) *Tensor                                                                                                                                `c:"ggml_mul_mat"`
	MulMatID       func(ctx Context, as, b, ids *Tensor) *Tensor                                                                                                                          `c:"ggml_mul_mat_id"`
	Add            func(ctx Context, a, b *Tensor) *Tensor                                                                                                                                `c:"ggml_add"`
	Mul            func(ctx Context, a, b *Tensor) *Tensor                                                                                                                                `c:"ggml_mul"`
	Scale          func(ctx Context, a *Tensor, s float32) *Tensor                                                                                                                        `c:"ggml_scale"`
	Rope           func(ctx Context, a, b *Tensor, nDims, mode int32) *Tensor                                                                                                             `c:"ggml_rope"`
	RopeExt        func(ctx Context, a, b, c *Tensor, nDims, mode, nCtxOrig int32, freqBase, freqScale, extFactor, attnFactor, betaFast, betaSlow float32) *Tensor                        `c:"ggml_rope_ext"`
	RopeExtBack    func(ctx Context, a, b, c *Tensor, nDims, mode, nCtxOrig int32, freqBase, freqScale, extFactor, attnFactor, betaFast, betaSlow float32) *Tensor                        `c:"ggml_rope_ext_back"`
	RopeExtInplace func(ctx Context, a, b, c *Tensor, nDims, mode, nCtxOrig int32, freqBase, freqScale, extFactor, attnFactor, betaFast, betaSlow float32) *Tensor                        `c:"ggml_rope_ext_inplace"`
	RopeMulti      func(ctx Context, a, b, c *Tensor, nDims int32, sections *int32, mode, nCtxOrig int32, freqBase, freqScale, extFactor, attnFactor, betaFast, betaSlow float32) *Tensor `c:"ggml_rope_multi"`
	RopeSetOffset  func(a *Tensor, nOffs int32) *Tensor                                                                                                                                   `c:"ggml_rope_set_offset"`
	AddID          func(ctx Context, a, b, ids *Tensor) *Tensor                                                                                                                           `c:"ggml_add_id"`
	Div            func(ctx Context, a, b *Tensor) *Tensor                                                                                                                                `c:"ggml_div"`
	SSMConv        func(ctx Context, sx, c *Tensor) *Tensor                                                                                                                               `c:"ggml_ssm_conv"`
	SSMScan        func(ctx Context, s, x, dt, A, B, C, ids *Tensor, k int64) *Tensor                                                                                                     `c:"ggml_ssm_scan"`
	RWKVWKV6       func(ctx Context, k, v, r, tf, td, state *Tensor) *Tensor                                                                                                              `c:"ggml_rwkv_wkv6"`
	IM2Col         func(ctx Context, a, b *Tensor, s0, s1, p0, p1, d0, d1 int32, is2D bool, dstType int32) *Tensor                                                                        `c:"ggml_im2col"`
	RMSNorm        func(ctx Context, a *Tensor, eps float32) *Tensor                                                                                                                      `c:"ggml_rms_norm"`
	Reshape1D      func(ctx Context, a *Tensor, ne0 int64) *Tensor                                                                                                                        `c:"ggml_reshape_1d"`
	Reshape2D      func(ctx Context, a *Tensor, ne0, ne1 int64) *Tensor                                                                                                                   `c:"ggml_reshape_2d"`
	Reshape3D      func(ctx Context, a *Tensor, ne0, ne1, ne2 int64) *Tensor                                                                                                              `c:"ggml_reshape_3d"`
	Cont           func(ctx Context, a *Tensor) *Tensor                                                                                                                                   `c:"ggml_cont"`
	Transpose      func(ctx Context, a *Tensor) *Tensor                                                                                                                                   `c:"ggml_transpose"`
	Permute        func(ctx Context, a *Tensor, ax0, ax1, ax2, ax3 int32) *Tensor                                                                                                         `c:"ggml_permute"`
	SoftMax        func(ctx Context, a *Tensor) *Tensor                                                                                                                                   `c:"ggml_soft_max"`
	Silu           func(ctx Context, a *Tensor) *Tensor                                                                                                                                   `c:"ggml_silu"`
	Cpy            func(ctx Context, a, b *Tensor) *Tensor                                                                                                                                `c:"ggml_cpy"`
	View1D         func(ctx Context, a *Tensor, ne0 int64, offset uintptr) *Tensor                                                                                                        `c:"ggml_view_1d"`
	View2D         func(ctx Context, a *Tensor, ne0, ne1 int64, nb1, offset uintptr) *Tensor                                                                                              `c:"ggml_view_2d"`

	// the ops llama.cpp's graph builders call (internal/replay/arch replays them
	// on a no_alloc context: every call is checked in Go first, a failed
	// GGML_ASSERT would end the process)
	NewTensor1D      func(ctx Context, typ int32, ne0 int64) *Tensor                                               `c:"ggml_new_tensor_1d"`
	NewTensor2D      func(ctx Context, typ int32, ne0, ne1 int64) *Tensor                                          `c:"ggml_new_tensor_2d"`
	NewTensor3D      func(ctx Context, typ int32, ne0, ne1, ne2 int64) *Tensor                                     `c:"ggml_new_tensor_3d"`
	NewTensor4D      func(ctx Context, typ int32, ne0, ne1, ne2, ne3 int64) *Tensor                                `c:"ggml_new_tensor_4d"`
	Reshape4D        func(ctx Context, a *Tensor, ne0, ne1, ne2, ne3 int64) *Tensor                                `c:"ggml_reshape_4d"`
	View3D           func(ctx Context, a *Tensor, ne0, ne1, ne2 int64, nb1, nb2, offset uintptr) *Tensor           `c:"ggml_view_3d"`
	View4D           func(ctx Context, a *Tensor, ne0, ne1, ne2, ne3 int64, nb1, nb2, nb3, offset uintptr) *Tensor `c:"ggml_view_4d"`
	Cont2D           func(ctx Context, a *Tensor, ne0, ne1 int64) *Tensor                                          `c:"ggml_cont_2d"`
	Cont3D           func(ctx Context, a *Tensor, ne0, ne1, ne2 int64) *Tensor                                     `c:"ggml_cont_3d"`
	Sub              func(ctx Context, a, b *Tensor) *Tensor                                                       `c:"ggml_sub"`
	Round            func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_round"`
	Xielu            func(ctx Context, a *Tensor, alphaN, alphaP, beta, eps float32) *Tensor                       `c:"ggml_xielu"`
	Set1D            func(ctx Context, a, b *Tensor, offset uintptr) *Tensor                                       `c:"ggml_set_1d"`
	ScaleInplace     func(ctx Context, a *Tensor, s float32) *Tensor                                               `c:"ggml_scale_inplace"`
	Exp              func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_exp"`
	Neg              func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_neg"`
	L2Norm           func(ctx Context, a *Tensor, eps float32) *Tensor                                             `c:"ggml_l2_norm"`
	Repeat           func(ctx Context, a, b *Tensor) *Tensor                                                       `c:"ggml_repeat"`
	GatedLinearAttn  func(ctx Context, k, v, q, g, state *Tensor, scale float32) *Tensor                           `c:"ggml_gated_linear_attn"`
	TopK             func(ctx Context, a *Tensor, k int32) *Tensor                                                 `c:"ggml_top_k"`
	Abs              func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_abs"`
	Sgn              func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_sgn"`
	AddInplace       func(ctx Context, a, b *Tensor) *Tensor                                                       `c:"ggml_add_inplace"`
	Cont4D           func(ctx Context, a *Tensor, ne0, ne1, ne2, ne3 int64) *Tensor                                `c:"ggml_cont_4d"`
	Argmax           func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_argmax"`
	Arange           func(ctx Context, start, stop, step float32) *Tensor                                          `c:"ggml_arange"`
	Diag             func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_diag"`
	PadExt           func(ctx Context, a *Tensor, lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3 int32) *Tensor            `c:"ggml_pad_ext"`
	SetInplace       func(ctx Context, a, b *Tensor, nb1, nb2, nb3, offset uintptr) *Tensor                        `c:"ggml_set_inplace"`
	Cumsum           func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_cumsum"`
	Tri              func(ctx Context, a *Tensor, typ int32) *Tensor                                               `c:"ggml_tri"`
	SolveTri         func(ctx Context, a, b *Tensor, left, lower, uni bool) *Tensor                                `c:"ggml_solve_tri"`
	Pool2D           func(ctx Context, a *Tensor, op, k0, k1, s0, s1 int32, p0, p1 float32) *Tensor                `c:"ggml_pool_2d"`
	GatedDeltaNet    func(ctx Context, q, k, v, g, beta, state *Tensor, K int64) *Tensor                           `c:"ggml_gated_delta_net"`
	LightningIndexer func(ctx Context, q, k, weights, mask *Tensor) *Tensor                                        `c:"ggml_lightning_indexer"`
	DSV4HCComb       func(ctx Context, mixes, scale, base *Tensor, eps float32, nIter int32) *Tensor               `c:"ggml_dsv4_hc_comb"`
	DSV4HCPre        func(ctx Context, x, weights *Tensor) *Tensor                                                 `c:"ggml_dsv4_hc_pre"`
	DSV4HCPreGated   func(ctx Context, x, gate *Tensor, scale float32) *Tensor                                     `c:"ggml_dsv4_hc_pre_gated"`
	DSV4HCPost       func(ctx Context, x, residual, post, comb *Tensor) *Tensor                                    `c:"ggml_dsv4_hc_post"`
	RWKVWKV7         func(ctx Context, r, w, k, v, a, b, state *Tensor) *Tensor                                    `c:"ggml_rwkv_wkv7"`
	Conv1DPh         func(ctx Context, a, b *Tensor, s, d int32) *Tensor                                           `c:"ggml_conv_1d_ph"`
	Conv1DDwPh       func(ctx Context, a, b *Tensor, s, d int32) *Tensor                                           `c:"ggml_conv_1d_dw_ph"`
	GroupNorm        func(ctx Context, a *Tensor, nGroups int32, eps float32) *Tensor                              `c:"ggml_group_norm"`
	Mean             func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_mean"`
	ScaleBias        func(ctx Context, a *Tensor, s, b float32) *Tensor                                            `c:"ggml_scale_bias"`
	Cast             func(ctx Context, a *Tensor, typ int32) *Tensor                                               `c:"ggml_cast"`
	SetRows          func(ctx Context, a, b, c *Tensor) *Tensor                                                    `c:"ggml_set_rows"`
	SoftMaxExt       func(ctx Context, a, mask *Tensor, scale, maxBias float32) *Tensor                            `c:"ggml_soft_max_ext"`
	SoftMaxAddSinks  func(a, sinks *Tensor)                                                                        `c:"ggml_soft_max_add_sinks"`
	FlashAttnExt     func(ctx Context, q, k, v, mask *Tensor, scale, maxBias, logitSoftcap float32) *Tensor        `c:"ggml_flash_attn_ext"`
	FlashAttnKVMax   func(a *Tensor, nKVMax int32)                                                                 `c:"ggml_flash_attn_ext_set_n_kv_max"`
	FlashAttnSinks   func(a, sinks *Tensor)                                                                        `c:"ggml_flash_attn_ext_add_sinks"`
	PrecSetAcc       func(a *Tensor, prec int32) bool                                                              `c:"ggml_prec_set_acc"`
	PrecSetSrc       func(a *Tensor, prec, idx int32) bool                                                         `c:"ggml_prec_set_src"`
	MulMatSetHint    func(a *Tensor, hint int32)                                                                   `c:"ggml_mul_mat_set_hint"`
	Norm             func(ctx Context, a *Tensor, eps float32) *Tensor                                             `c:"ggml_norm"`
	Clamp            func(ctx Context, a *Tensor, lo, hi float32) *Tensor                                          `c:"ggml_clamp"`
	Fill             func(ctx Context, a *Tensor, c float32) *Tensor                                               `c:"ggml_fill"`
	Tanh             func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_tanh"`
	Relu             func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_relu"`
	Gelu             func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_gelu"`
	Sigmoid          func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_sigmoid"`
	Sqr              func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_sqr"`
	Sqrt             func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_sqrt"`
	SumRows          func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_sum_rows"`
	Softplus         func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_softplus"`
	Swiglu           func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_swiglu"`
	Geglu            func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_geglu"`
	Reglu            func(ctx Context, a *Tensor) *Tensor                                                          `c:"ggml_reglu"`
	SwigluSplit      func(ctx Context, a, b *Tensor) *Tensor                                                       `c:"ggml_swiglu_split"`
	GegluSplit       func(ctx Context, a, b *Tensor) *Tensor                                                       `c:"ggml_geglu_split"`
	RegluSplit       func(ctx Context, a, b *Tensor) *Tensor                                                       `c:"ggml_reglu_split"`
	SwigluOAI        func(ctx Context, a, b *Tensor, alpha, limit float32) *Tensor                                 `c:"ggml_swiglu_oai"`
	SwigluClamp      func(ctx Context, a, b *Tensor, limit float32) *Tensor                                        `c:"ggml_swiglu_clamp"`
	Concat           func(ctx Context, a, b *Tensor, dim int32) *Tensor                                            `c:"ggml_concat"`
	Repeat4D         func(ctx Context, a *Tensor, ne0, ne1, ne2, ne3 int64) *Tensor                                `c:"ggml_repeat_4d"`
	Pad              func(ctx Context, a *Tensor, p0, p1, p2, p3 int32) *Tensor                                    `c:"ggml_pad"`
	ArgsortTopK      func(ctx Context, a *Tensor, k int32) *Tensor                                                 `c:"ggml_argsort_top_k"`
	BuildForwardSel  func(g Graph, tensors **Tensor, n, idx int32) *Tensor                                         `c:"ggml_build_forward_select"`
	GraphSize        func(g Graph) int32                                                                           `c:"ggml_graph_size"`

	// the multimodal projectors' ops (convolutions, windows, resampling,
	// the activations of vision and audio encoders)
	Conv2D          func(ctx Context, a, b *Tensor, s0, s1, p0, p1, d0, d1 int32) *Tensor       `c:"ggml_conv_2d"`
	Conv2DDirect    func(ctx Context, a, b *Tensor, s0, s1, p0, p1, d0, d1 int32) *Tensor       `c:"ggml_conv_2d_direct"`
	Conv2DDw        func(ctx Context, a, b *Tensor, s0, s1, p0, p1, d0, d1 int32) *Tensor       `c:"ggml_conv_2d_dw"`
	Conv2DDwDirect  func(ctx Context, a, b *Tensor, s0, s1, p0, p1, d0, d1 int32) *Tensor       `c:"ggml_conv_2d_dw_direct"`
	Conv1D          func(ctx Context, a, b *Tensor, s0, p0, d0 int32) *Tensor                   `c:"ggml_conv_1d"`
	Conv1DDw        func(ctx Context, a, b *Tensor, s0, p0, d0 int32) *Tensor                   `c:"ggml_conv_1d_dw"`
	Col2Im1D        func(ctx Context, a *Tensor, s0, oc, p0 int32) *Tensor                      `c:"ggml_col2im_1d"`
	Pool1D          func(ctx Context, a *Tensor, op, k0, s0, p0 int32) *Tensor                  `c:"ggml_pool_1d"`
	PadReflect1D    func(ctx Context, a *Tensor, p0, p1 int32) *Tensor                          `c:"ggml_pad_reflect_1d"`
	Roll            func(ctx Context, a *Tensor, shift0, shift1, shift2, shift3 int32) *Tensor  `c:"ggml_roll"`
	Interpolate     func(ctx Context, a *Tensor, ne0, ne1, ne2, ne3 int64, mode uint32) *Tensor `c:"ggml_interpolate"`
	Upscale         func(ctx Context, a *Tensor, factor, mode int32) *Tensor                    `c:"ggml_upscale"`
	WinPart         func(ctx Context, a *Tensor, w int32) *Tensor                               `c:"ggml_win_part"`
	WinUnpart       func(ctx Context, a *Tensor, w0, h0, w int32) *Tensor                       `c:"ggml_win_unpart"`
	Argsort         func(ctx Context, a *Tensor, order int32) *Tensor                           `c:"ggml_argsort"`
	Sum             func(ctx Context, a *Tensor) *Tensor                                        `c:"ggml_sum"`
	Sin             func(ctx Context, a *Tensor) *Tensor                                        `c:"ggml_sin"`
	Cos             func(ctx Context, a *Tensor) *Tensor                                        `c:"ggml_cos"`
	Log             func(ctx Context, a *Tensor) *Tensor                                        `c:"ggml_log"`
	Step            func(ctx Context, a *Tensor) *Tensor                                        `c:"ggml_step"`
	Elu             func(ctx Context, a *Tensor) *Tensor                                        `c:"ggml_elu"`
	GeluErf         func(ctx Context, a *Tensor) *Tensor                                        `c:"ggml_gelu_erf"`
	GeluQuick       func(ctx Context, a *Tensor) *Tensor                                        `c:"ggml_gelu_quick"`
	GeluInplace     func(ctx Context, a *Tensor) *Tensor                                        `c:"ggml_gelu_inplace"`
	ReluInplace     func(ctx Context, a *Tensor) *Tensor                                        `c:"ggml_relu_inplace"`
	Hardswish       func(ctx Context, a *Tensor) *Tensor                                        `c:"ggml_hardswish"`
	Hardsigmoid     func(ctx Context, a *Tensor) *Tensor                                        `c:"ggml_hardsigmoid"`
	SwigluSwapped   func(ctx Context, a *Tensor) *Tensor                                        `c:"ggml_swiglu_swapped"`
	GegluQuickSplit func(ctx Context, a, b *Tensor) *Tensor                                     `c:"ggml_geglu_quick_split"`
	GegluErfSplit   func(ctx Context, a, b *Tensor) *Tensor                                     `c:"ggml_geglu_erf_split"`

	// graphs
	NewGraph           func(ctx Context) Graph                           `c:"ggml_new_graph"`
	NewGraphCustom     func(ctx Context, size uintptr, grads bool) Graph `c:"ggml_new_graph_custom"`
	BuildForwardExpand func(g Graph, t *Tensor)                          `c:"ggml_build_forward_expand"`
	BuildForwardOrder  func(g Graph, t *Tensor)                          `c:"ggml_build_forward_order"`
	GraphNNodes        func(g Graph) int32                               `c:"ggml_graph_n_nodes"`
	GraphNode          func(g Graph, i int32) *Tensor                    `c:"ggml_graph_node"`
	GraphNodes         func(g Graph) **Tensor                            `c:"ggml_graph_nodes"`

	// buffer types
	BuftName         func(b Buft) string                         `c:"ggml_backend_buft_name"`
	BuftAllocBuffer  func(b Buft, size uintptr) Buffer           `c:"ggml_backend_buft_alloc_buffer"`
	BuftGetAlignment func(b Buft) uintptr                        `c:"ggml_backend_buft_get_alignment"`
	BuftGetMaxSize   func(b Buft) uintptr                        `c:"ggml_backend_buft_get_max_size"`
	BuftGetAllocSize func(b Buft, t *Tensor) uintptr             `c:"ggml_backend_buft_get_alloc_size"`
	BuftIsHost       func(b Buft) bool                           `c:"ggml_backend_buft_is_host"`
	BuftGetDevice    func(b Buft) Dev                            `c:"ggml_backend_buft_get_device"`
	CPUBufferType    func() Buft                                 `c:"ggml_backend_cpu_buffer_type"`
	CPUBufferFromPtr func(p unsafe.Pointer, size uintptr) Buffer `c:"ggml_backend_cpu_buffer_from_ptr"`

	// buffers
	BufferName                  func(b Buffer) string                                `c:"ggml_backend_buffer_name"`
	BufferFree                  func(b Buffer)                                       `c:"ggml_backend_buffer_free"`
	BufferGetBase               func(b Buffer) unsafe.Pointer                        `c:"ggml_backend_buffer_get_base"`
	BufferGetSize               func(b Buffer) uintptr                               `c:"ggml_backend_buffer_get_size"`
	BufferGetAlignment          func(b Buffer) uintptr                               `c:"ggml_backend_buffer_get_alignment"`
	BufferGetAllocSize          func(b Buffer, t *Tensor) uintptr                    `c:"ggml_backend_buffer_get_alloc_size"`
	BufferClear                 func(b Buffer, v uint8)                              `c:"ggml_backend_buffer_clear"`
	BufferIsHost                func(b Buffer) bool                                  `c:"ggml_backend_buffer_is_host"`
	BufferSetUsage              func(b Buffer, usage int32)                          `c:"ggml_backend_buffer_set_usage"`
	BufferGetUsage              func(b Buffer) int32                                 `c:"ggml_backend_buffer_get_usage"`
	BufferGetType               func(b Buffer) Buft                                  `c:"ggml_backend_buffer_get_type"`
	BufferInitTensor            func(b Buffer, t *Tensor) int32                      `c:"ggml_backend_buffer_init_tensor"`
	TensorAlloc                 func(b Buffer, t *Tensor, addr unsafe.Pointer) int32 `c:"ggml_backend_tensor_alloc"`
	AllocCtxTensorsFromBuft     func(ctx Context, b Buft) Buffer                     `c:"ggml_backend_alloc_ctx_tensors_from_buft"`
	AllocCtxTensorsFromBuftSize func(ctx Context, b Buft) uintptr                    `c:"ggml_backend_alloc_ctx_tensors_from_buft_size"`

	// tensor data
	TensorSet      func(t *Tensor, data unsafe.Pointer, offset, size uintptr)             `c:"ggml_backend_tensor_set"`
	TensorGet      func(t *Tensor, data unsafe.Pointer, offset, size uintptr)             `c:"ggml_backend_tensor_get"`
	TensorMemset   func(t *Tensor, v uint8, offset, size uintptr)                         `c:"ggml_backend_tensor_memset"`
	TensorSetAsync func(be Backend, t *Tensor, data unsafe.Pointer, offset, size uintptr) `c:"ggml_backend_tensor_set_async"`
	TensorGetAsync func(be Backend, t *Tensor, data unsafe.Pointer, offset, size uintptr) `c:"ggml_backend_tensor_get_async"`

	// the CPU backend's thread pools (ggml_threadpool_new and its kin come
	// from the CPU backend's registry: bindings.Proc)
	ThreadpoolParamsInit func(p *ThreadpoolParams, nThreads int32) `c:"ggml_threadpool_params_init"`

	// backends (streams)
	BackendName         func(be Backend) string         `c:"ggml_backend_name"`
	BackendFree         func(be Backend)                `c:"ggml_backend_free"`
	BackendGetDevice    func(be Backend) Dev            `c:"ggml_backend_get_device"`
	BackendSynchronize  func(be Backend)                `c:"ggml_backend_synchronize"`
	BackendGraphCompute func(be Backend, g Graph) int32 `c:"ggml_backend_graph_compute"`
	BackendDefaultBuft  func(be Backend) Buft           `c:"ggml_backend_get_default_buffer_type"`

	// events
	EventNew         func(d Dev) Event         `c:"ggml_backend_event_new"`
	EventFree        func(e Event)             `c:"ggml_backend_event_free"`
	EventRecord      func(e Event, be Backend) `c:"ggml_backend_event_record"`
	EventSynchronize func(e Event)             `c:"ggml_backend_event_synchronize"`

	// devices
	DevName              func(d Dev) string                                                `c:"ggml_backend_dev_name"`
	DevDescription       func(d Dev) string                                                `c:"ggml_backend_dev_description"`
	DevMemory            func(d Dev, free, total *uintptr)                                 `c:"ggml_backend_dev_memory"`
	DevType              func(d Dev) int32                                                 `c:"ggml_backend_dev_type"`
	DevGetProps          func(d Dev, p *DevProps)                                          `c:"ggml_backend_dev_get_props"`
	DevBackendReg        func(d Dev) Reg                                                   `c:"ggml_backend_dev_backend_reg"`
	DevInit              func(d Dev, params *byte) Backend                                 `c:"ggml_backend_dev_init"`
	DevBufferType        func(d Dev) Buft                                                  `c:"ggml_backend_dev_buffer_type"`
	DevHostBufferType    func(d Dev) Buft                                                  `c:"ggml_backend_dev_host_buffer_type"`
	DevBufferFromHostPtr func(d Dev, p unsafe.Pointer, size, maxTensorSize uintptr) Buffer `c:"ggml_backend_dev_buffer_from_host_ptr"`
	DevSupportsOp        func(d Dev, op *Tensor) bool                                      `c:"ggml_backend_dev_supports_op"`
	DevSupportsBuft      func(d Dev, b Buft) bool                                          `c:"ggml_backend_dev_supports_buft"`
	MetaDevice           func(devs *Dev, n uintptr, getSplitState, ud uintptr) Dev         `c:"ggml_backend_meta_device"`

	// registry
	RegName           func(r Reg) string               `c:"ggml_backend_reg_name"`
	RegDevCount       func(r Reg) uintptr              `c:"ggml_backend_reg_dev_count"`
	RegDevGet         func(r Reg, i uintptr) Dev       `c:"ggml_backend_reg_dev_get"`
	RegGetProcAddress func(r Reg, name string) uintptr `c:"ggml_backend_reg_get_proc_address"`
	RegCount          func() uintptr                   `c:"ggml_backend_reg_count"`
	RegGet            func(i uintptr) Reg              `c:"ggml_backend_reg_get"`
	RegByName         func(name string) Reg            `c:"ggml_backend_reg_by_name"`
	DevCount          func() uintptr                   `c:"ggml_backend_dev_count"`
	DevGet            func(i uintptr) Dev              `c:"ggml_backend_dev_get"`
	DevByName         func(name string) Dev            `c:"ggml_backend_dev_by_name"`
	DevByType         func(typ int32) Dev              `c:"ggml_backend_dev_by_type"`
	Load              func(path string) Reg            `c:"ggml_backend_load"`
	Register          func(r Reg)                      `c:"ggml_backend_register"`
	LoadAllFromPath   func(dir string)                 `c:"ggml_backend_load_all_from_path"`

	// scheduler
	SchedNew              func(backends *Backend, bufts *Buft, n int32, graphSize uintptr, parallel, opOffload bool) Sched `c:"ggml_backend_sched_new"`
	SchedFree             func(s Sched)                                                                                    `c:"ggml_backend_sched_free"`
	SchedReserve          func(s Sched, g Graph) bool                                                                      `c:"ggml_backend_sched_reserve"`
	SchedAllocGraph       func(s Sched, g Graph) bool                                                                      `c:"ggml_backend_sched_alloc_graph"`
	SchedGraphCompute     func(s Sched, g Graph) int32                                                                     `c:"ggml_backend_sched_graph_compute"`
	SchedReset            func(s Sched)                                                                                    `c:"ggml_backend_sched_reset"`
	SchedSetTensorBackend func(s Sched, t *Tensor, be Backend)                                                             `c:"ggml_backend_sched_set_tensor_backend"`
	SchedGetTensorBackend func(s Sched, t *Tensor) Backend                                                                 `c:"ggml_backend_sched_get_tensor_backend"`
	SchedGetNSplits       func(s Sched) int32                                                                              `c:"ggml_backend_sched_get_n_splits"`
	SchedGetBufferSize    func(s Sched, be Backend) uintptr                                                                `c:"ggml_backend_sched_get_buffer_size"`
	SchedReserveSize      func(s Sched, g Graph, sizes *uintptr)                                                           `c:"ggml_backend_sched_reserve_size"`
	SchedSplitGraph       func(s Sched, g Graph)                                                                           `c:"ggml_backend_sched_split_graph"`

	// the native GGUF reader and writer (cross-checks and fixtures)
	GGUFInitFromFile    func(fname string, p GGUFInitParams) GGUFContext                           `c:"gguf_init_from_file"`
	GGUFInitEmpty       func() GGUFContext                                                         `c:"gguf_init_empty"`
	GGUFFree            func(c GGUFContext)                                                        `c:"gguf_free"`
	GGUFTypeName        func(typ int32) string                                                     `c:"gguf_type_name"`
	GGUFGetVersion      func(c GGUFContext) uint32                                                 `c:"gguf_get_version"`
	GGUFGetAlignment    func(c GGUFContext) uintptr                                                `c:"gguf_get_alignment"`
	GGUFGetDataOffset   func(c GGUFContext) uintptr                                                `c:"gguf_get_data_offset"`
	GGUFGetNKV          func(c GGUFContext) int64                                                  `c:"gguf_get_n_kv"`
	GGUFFindKey         func(c GGUFContext, key string) int64                                      `c:"gguf_find_key"`
	GGUFGetKey          func(c GGUFContext, id int64) string                                       `c:"gguf_get_key"`
	GGUFGetKVType       func(c GGUFContext, id int64) int32                                        `c:"gguf_get_kv_type"`
	GGUFGetArrType      func(c GGUFContext, id int64) int32                                        `c:"gguf_get_arr_type"`
	GGUFGetValU8        func(c GGUFContext, id int64) uint8                                        `c:"gguf_get_val_u8"`
	GGUFGetValI8        func(c GGUFContext, id int64) int8                                         `c:"gguf_get_val_i8"`
	GGUFGetValU16       func(c GGUFContext, id int64) uint16                                       `c:"gguf_get_val_u16"`
	GGUFGetValI16       func(c GGUFContext, id int64) int16                                        `c:"gguf_get_val_i16"`
	GGUFGetValU32       func(c GGUFContext, id int64) uint32                                       `c:"gguf_get_val_u32"`
	GGUFGetValI32       func(c GGUFContext, id int64) int32                                        `c:"gguf_get_val_i32"`
	GGUFGetValF32       func(c GGUFContext, id int64) float32                                      `c:"gguf_get_val_f32"`
	GGUFGetValU64       func(c GGUFContext, id int64) uint64                                       `c:"gguf_get_val_u64"`
	GGUFGetValI64       func(c GGUFContext, id int64) int64                                        `c:"gguf_get_val_i64"`
	GGUFGetValF64       func(c GGUFContext, id int64) float64                                      `c:"gguf_get_val_f64"`
	GGUFGetValBool      func(c GGUFContext, id int64) bool                                         `c:"gguf_get_val_bool"`
	GGUFGetValStr       func(c GGUFContext, id int64) *byte                                        `c:"gguf_get_val_str"`
	GGUFGetArrN         func(c GGUFContext, id int64) uintptr                                      `c:"gguf_get_arr_n"`
	GGUFGetArrData      func(c GGUFContext, id int64) unsafe.Pointer                               `c:"gguf_get_arr_data"`
	GGUFGetArrStr       func(c GGUFContext, id int64, i uintptr) *byte                             `c:"gguf_get_arr_str"`
	GGUFGetNTensors     func(c GGUFContext) int64                                                  `c:"gguf_get_n_tensors"`
	GGUFFindTensor      func(c GGUFContext, name string) int64                                     `c:"gguf_find_tensor"`
	GGUFGetTensorOffset func(c GGUFContext, id int64) uintptr                                      `c:"gguf_get_tensor_offset"`
	GGUFGetTensorName   func(c GGUFContext, id int64) string                                       `c:"gguf_get_tensor_name"`
	GGUFGetTensorType   func(c GGUFContext, id int64) int32                                        `c:"gguf_get_tensor_type"`
	GGUFGetTensorSize   func(c GGUFContext, id int64) uintptr                                      `c:"gguf_get_tensor_size"`
	GGUFGetTensorNe     func(c GGUFContext, id int64) *int64                                       `c:"gguf_get_tensor_ne" opt:"1"`
	GGUFSetValU8        func(c GGUFContext, key string, v uint8)                                   `c:"gguf_set_val_u8"`
	GGUFSetValI8        func(c GGUFContext, key string, v int8)                                    `c:"gguf_set_val_i8"`
	GGUFSetValU16       func(c GGUFContext, key string, v uint16)                                  `c:"gguf_set_val_u16"`
	GGUFSetValI16       func(c GGUFContext, key string, v int16)                                   `c:"gguf_set_val_i16"`
	GGUFSetValU32       func(c GGUFContext, key string, v uint32)                                  `c:"gguf_set_val_u32"`
	GGUFSetValI32       func(c GGUFContext, key string, v int32)                                   `c:"gguf_set_val_i32"`
	GGUFSetValF32       func(c GGUFContext, key string, v float32)                                 `c:"gguf_set_val_f32"`
	GGUFSetValU64       func(c GGUFContext, key string, v uint64)                                  `c:"gguf_set_val_u64"`
	GGUFSetValI64       func(c GGUFContext, key string, v int64)                                   `c:"gguf_set_val_i64"`
	GGUFSetValF64       func(c GGUFContext, key string, v float64)                                 `c:"gguf_set_val_f64"`
	GGUFSetValBool      func(c GGUFContext, key string, v bool)                                    `c:"gguf_set_val_bool"`
	GGUFSetValStr       func(c GGUFContext, key string, v string)                                  `c:"gguf_set_val_str"`
	GGUFSetArrData      func(c GGUFContext, key string, typ int32, data unsafe.Pointer, n uintptr) `c:"gguf_set_arr_data"`
	GGUFSetArrStr       func(c GGUFContext, key string, data **byte, n uintptr)                    `c:"gguf_set_arr_str"`
	GGUFAddTensor       func(c GGUFContext, t *Tensor)                                             `c:"gguf_add_tensor"`
	GGUFWriteToFile     func(c GGUFContext, fname string, onlyMeta bool) bool                      `c:"gguf_write_to_file"`
}
