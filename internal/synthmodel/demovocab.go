package synthmodel

import (
	"math"
	"math/rand/v2"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
)

// Tokenizer is a tokenizer for a synthesized model: its tokenizer.* keys, and
// which of its tokens are whole words, which the model's output layer
// favours (Spec.Tokenizer).
type Tokenizer struct {
	KV    []gguf.KV
	Words []bool // per token
	Size  int
}

// demoWords are common English words, the most common first: the
// demo's vocabulary holds each with every prefix its SentencePiece merges
// pass through.
const demoWords = `the of and to a in is it you that he was for on are with as I his they be at one have this
from or had by hot word but what some we can out other were all there when up use your how said an each she which
do their time if will way about many then them write would like so these her long make thing see him two has look
more day could go come did number sound no most people my over know water than call first who may down side been now
find any new work part take get place made live where after back little only round man year came show every good me
give our under name very through just form sentence great think say help low line differ turn cause much mean before
move right boy old too same tell does set three want air well also play small end put home read hand port large spell
add even land here must big high such follow act why ask men change went light kind off need house picture try us
again animal point mother world near build self earth father head stand own page should country found answer school
grow study still learn plant cover food sun four between state keep eye never last let thought city tree cross farm
hard start might story saw far sea draw left late run while press close night real life few north open seem together
next white children begin got walk example ease paper group always music those both mark often letter until mile
river car feet care second book carry took science eat room friend began idea fish mountain stop once base hear horse
cut sure watch color face wood main enough plain girl usual young ready above ever red list though feel talk bird
soon body dog family direct pose leave song measure door product black short numeral class wind question happen
complete ship area half rock order fire south problem piece told knew pass since top whole king space heard best hour
better true during hundred five remember step early hold west ground interest reach fast verb sing listen six table
travel less morning ten simple several vowel toward war lay against pattern slow center love person money serve
appear road map rain rule govern pull cold notice voice unit power town fine certain fly fall lead cry dark machine
note wait plan figure star box noun field rest correct able pound done beauty drive stood contain front teach week
final gave green quick develop ocean warm free minute strong special mind behind clear tail produce fact street inch
multiply nothing course stay wheel full force blue object decide surface deep moon island foot system busy test
record boat common gold possible plane stead dry wonder laugh thousand ago ran check game shape equate miss brought
heat snow tire bring yes distant fill east paint language among grand ball yet wave drop heart present heavy dance
engine position arm wide sail material size vary settle speak weight general ice matter circle pair include divide
syllable felt perhaps pick sudden count square reason length represent art subject region energy hunt probable bed
brother egg ride cell believe fraction forest sit race window store summer train sleep prove lone exercise wall catch
mount wish sky board joy winter sat written wild instrument kept glass grass cow job edge sign visit past soft fun
bright gas weather month million bear finish happy hope flower clothe strange gone jump baby eight village meet root
buy raise solve metal whether push seven paragraph third shall held hair describe cook floor either result burn hill
safe cat century consider type law bit coast copy phrase silent tall sand soil roll temperature finger industry value
fight lie beat excite natural view sense ear else quite broke case middle kill son lake moment scale loud spring
observe child straight consonant nation dictionary milk speed method organ pay age section dress cloud surprise quiet
stone tiny climb cool design poor lot experiment bottom key iron single stick flat twenty skin smile crease hole trade
melody trip office receive row mouth exact symbol die least trouble shout except wrote seed tone join suggest clean
break lady yard rise bad blow oil blood touch grew cent mix team wire cost lost brown wear garden equal sent choose
fell fit flow fair bank collect save control decimal gentle woman captain practice separate difficult doctor please
protect noon whose locate ring character insect caught period indicate radio spoke atom human history effect electric
expect crop modern element hit student corner party supply bone rail imagine provide agree thus capital chair danger
fruit rich thick soldier process operate guess necessary sharp wing create neighbor wash bat rather crowd corn compare
poem string bell depend meat rub tube famous dollar stream fear sight thin triangle planet hurry chief colony clock
mine tie enter major fresh search send yellow gun allow print dead spot desert suit current lift rose continue block
chart hat sell success company subtract event particular deal swim term opposite wife shoe shoulder spread arrange
camp invent cotton born determine quart nine truck noise level chance gather shop stretch throw shine property column
molecule select wrong gray repeat require broad prepare salt nose plural anger claim continent oxygen sugar death
pretty skill women season solution magnet silver thank branch match suffix especially fig afraid huge sister steel
discuss forward similar guide experience score apple bought led pitch coat mass card band rope slip win dream evening
condition feed tool total basic smell valley nor double seat arrive master track parent shore division sheet
substance favor connect post spend chord fat glad original share station dad bread charge proper bar offer segment
slave duck instant market degree populate chick dear enemy reply drink occur support speech nature range steam motion
path liquid log meant quotient teeth shell neck`

// DemoVocab is a SentencePiece vocabulary (tokenizer.ggml.model llama) of
// size tokens: <unk>, <s>, </s>, the 256 byte tokens a piece falls back
// to, the printable ASCII characters, then demoWords, each as ▁WORD with
// the prefixes its merges pass through (llama.cpp's tokenizer joins the
// pair of the best score), until size. The words' own tokens are marked
// in Words.
func DemoVocab(size int) Tokenizer {
	var toks []string
	var scores []float32
	var types []int32
	seen := map[string]int{}
	add := func(piece string, score float32, typ int32) int {
		if i, ok := seen[piece]; ok {
			return i
		}
		seen[piece] = len(toks)
		toks = append(toks, piece)
		scores = append(scores, score)
		types = append(types, typ)
		return len(toks) - 1
	}
	const normal, unknown, control, byteTok = 1, 2, 3, 6
	add("<unk>", 0, unknown)
	add("<s>", 0, control)
	add("</s>", 0, control)
	for b := range 256 {
		add(byteName(b), 0, byteTok)
	}
	add("▁", -1, normal)
	for c := byte(' ' + 1); c < 0x7f; c++ {
		add(string(c), -2, normal)
		add("▁"+string(c), -3, normal)
	}
	var words []int
	for rank, w := range strings.Fields(demoWords) {
		piece := "▁" + w
		need := 0
		for i := len("▁") + 1; i <= len(piece); i++ {
			if _, ok := seen[piece[:i]]; !ok {
				need++
			}
		}
		if len(toks)+need > size {
			break
		}
		for i := len("▁") + 2; i <= len(piece); i++ {
			add(piece[:i], -4-float32(rank)/1000, normal)
		}
		words = append(words, seen[piece])
	}
	for len(toks) < size {
		add("<unused"+itoa(len(toks))+">", -1e9, 5) // user-defined, never produced
	}
	v := Tokenizer{Words: make([]bool, len(toks)), Size: len(toks)}
	for _, i := range words {
		v.Words[i] = true
	}
	ts, _ := gguf.Array(toks)
	ss, _ := gguf.Array(scores)
	ty, _ := gguf.Array(types)
	v.KV = []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.String("llama")},
		{Key: "tokenizer.ggml.pre", Value: gguf.String("default")},
		{Key: "tokenizer.ggml.tokens", Value: ts},
		{Key: "tokenizer.ggml.scores", Value: ss},
		{Key: "tokenizer.ggml.token_type", Value: ty},
		{Key: "tokenizer.ggml.unknown_token_id", Value: gguf.Uint32(0)},
		{Key: "tokenizer.ggml.bos_token_id", Value: gguf.Uint32(1)},
		{Key: "tokenizer.ggml.eos_token_id", Value: gguf.Uint32(2)},
		{Key: "tokenizer.ggml.add_bos_token", Value: gguf.Bool(true)},
		{Key: "tokenizer.ggml.add_eos_token", Value: gguf.Bool(false)},
	}
	return v
}

func byteName(b int) string {
	const hex = "0123456789ABCDEF"
	return "<0x" + string(hex[b>>4]) + string(hex[b&15]) + ">"
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// wordRows is an output layer of vocab's size over width inputs whose
// rows for the whole words are random and distinct, and zero for every
// other token: the logits of the words spread over a few units, the
// others' zero, so that sampling picks words.
func wordRows(rt *ggml.Runtime, typ ggml.Type, width int64, v Tokenizer, seed uint64) ([]byte, error) {
	r := rand.New(rand.NewPCG(seed, 0x0a0b))
	src := make([]float32, int64(v.Size)*width)
	amp := float32(2.5 / math.Sqrt(float64(width)))
	for tok, word := range v.Words {
		if !word {
			continue
		}
		row := src[int64(tok)*width : int64(tok+1)*width]
		for j := range row {
			row[j] = (2*r.Float32() - 1) * amp * 1.7
		}
	}
	return encodeRows(rt, typ, src, width)
}
