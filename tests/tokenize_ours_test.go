package tests

import "github.com/ggload/ggload/vocab"

// oursSide is ggload's vocabulary.
type oursSide struct{ *vocab.Vocab }

func openOurs(path string) (tokSide, error) {
	v, err := vocab.Open(path)
	if err != nil {
		return nil, err
	}
	return oursSide{v}, nil
}

func (s oursSide) Type() int { return int(s.Vocab.Type()) }

func (s oursSide) Attr(t int32) uint32 { return uint32(s.Vocab.Attr(t)) }

func (s oursSide) Specials() []int32 {
	v := s.Vocab
	return []int32{v.BOS(), v.EOS(), v.EOT(), v.SEP(), v.NL(), v.PAD(), v.MASK(), v.FIMPre(), v.FIMSuf(), v.FIMMid(), v.FIMPad(), v.FIMRep(), v.FIMSep()}
}

func (s oursSide) AddFlags() [3]bool { return [3]bool{s.AddBOS(), s.AddEOS(), s.AddSEP()} }
