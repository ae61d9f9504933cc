// Port of llama.cpp src/llama-vocab.cpp (v0.5.0): naive_trie and
// llama_unescape_rwkv_token.

package vocab

// trie is naive_trie: a byte trie with an optional token at each node.
// Children are kept in one map keyed by (node, byte).
type trie struct {
	kids  map[uint64]int32
	value []Token // Null where the node has no value
}

func newTrie() *trie {
	return &trie{kids: map[uint64]int32{}, value: []Token{Null}}
}

// insert sets the value at key's node (a later insert of the same key
// wins, as naive_trie::insert does).
func (t *trie) insert(key []byte, id Token) {
	n := int32(0)
	for _, c := range key {
		k := uint64(n)<<8 | uint64(c)
		child, ok := t.kids[k]
		if !ok {
			child = int32(len(t.value))
			t.value = append(t.value, Null)
			t.kids[k] = child
		}
		n = child
	}
	t.value[n] = id
}

// child is naive_trie::traverse: the node under n for byte c, or -1.
func (t *trie) child(n int32, c byte) int32 {
	if k, ok := t.kids[uint64(n)<<8|uint64(c)]; ok {
		return k
	}
	return -1
}

// depth is naive_trie::get_longest_prefix's length: how far key's bytes
// lead down the trie, whether or not the node reached holds a value.
func (t *trie) depth(key string) int {
	n := int32(0)
	for i := 0; i < len(key); i++ {
		if n = t.child(n, key[i]); n < 0 {
			return i
		}
	}
	return len(key)
}

// unescapeRWKV is llama_unescape_rwkv_token: \t \n \r \xHH and \c escapes.
func unescapeRWKV(dst []byte, s string) []byte {
	escaping := false
	hexLeft := 0
	var acc byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if hexLeft != 0 {
			var val byte
			if c >= 'a' {
				val = c - 'a' + 10
			} else {
				val = c - '0'
			}
			acc = acc<<4 + val
			hexLeft--
			if hexLeft == 0 {
				dst = append(dst, acc)
				acc = 0
			}
			continue
		}
		if escaping {
			switch c {
			case 't':
				dst = append(dst, '\t')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 'x':
				hexLeft = 2
			default:
				dst = append(dst, c)
			}
			escaping = false
			continue
		}
		if c == '\\' {
			escaping = true
			continue
		}
		dst = append(dst, c)
	}
	return dst
}

// rwkvTokenize is llm_tokenizer_rwkv_session::tokenize: the longest token
// at each position, UNK for a byte no token starts with.
func (v *Vocab) rwkvTokenize(text string, out []Token) ([]Token, error) {
	t := v.rwkv
	for pos := 0; pos < len(text); {
		node := t.child(0, text[pos])
		if node < 0 {
			out = append(out, v.unk)
			pos++
			continue
		}
		id, end := Token(0), 0
		for node >= 0 {
			if t.value[node] != Null {
				id, end = t.value[node], pos+1
			}
			if pos+1 >= len(text) {
				break
			}
			pos++
			node = t.child(node, text[pos])
		}
		if end == 0 {
			return out, v.errorf("no token is a prefix of the text at byte %d (llama.cpp's RWKV tokenizer loops forever)", pos)
		}
		out = append(out, id)
		pos = end
	}
	return out, nil
}
