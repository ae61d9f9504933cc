// The oracle of package unicode's tests: llama.cpp's own src/unicode.cpp
// over length-prefixed input on stdin, its answers length-prefixed on
// stdout (all integers little-endian uint32 unless said otherwise).
//
//   split-oracle split   in: nexprs, exprs, byte_encode (u8), ntexts, texts
//                        out: per text: 0, nwords, words | 1, message
//   split-oracle decode  in: ntexts, texts
//                        out: per text: ncpts, cpts; per byte offset:
//                             ok (u8), cpt, next; flags_from_utf8: ok (u8), flags (u16)
//   split-oracle tables  out: per value 0..0x11000F: flags (u16), tolower,
//                             nfd, is_han (u8), utf8: len (u8), bytes;
//                             then per byte 0..255: len (u8), byte_to_utf8

// src/unicode.h comes first through -include (common/ has a unicode.h too).

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

static std::string out;

static void put32(uint32_t v) { out.append(reinterpret_cast<const char *>(&v), 4); }
static void put16(uint16_t v) { out.append(reinterpret_cast<const char *>(&v), 2); }
static void put8(uint8_t v) { out.push_back(static_cast<char>(v)); }
static void putstr(const std::string & s) { put32(s.size()); out += s; }

static bool get32(uint32_t & v) { return fread(&v, 4, 1, stdin) == 1; }

static std::string getstr() {
    uint32_t n = 0;
    if (!get32(n)) { fprintf(stderr, "short input\n"); exit(2); }
    std::string s(n, '\0');
    if (n && fread(&s[0], 1, n, stdin) != n) { fprintf(stderr, "short input\n"); exit(2); }
    return s;
}

static void flush() {
    fwrite(out.data(), 1, out.size(), stdout);
    out.clear();
}

int main(int argc, char ** argv) {
    if (argc != 2) { fprintf(stderr, "usage: split-oracle split|decode|tables\n"); return 2; }
    std::string mode = argv[1];
    if (mode == "split") {
        uint32_t ne = 0;
        get32(ne);
        std::vector<std::string> exprs;
        for (uint32_t i = 0; i < ne; i++) exprs.push_back(getstr());
        uint8_t be = 0;
        if (fread(&be, 1, 1, stdin) != 1) return 2;
        uint32_t nt = 0;
        get32(nt);
        for (uint32_t i = 0; i < nt; i++) {
            std::string text = getstr();
            try {
                auto words = unicode_regex_split(text, exprs, be != 0);
                put32(0);
                put32(words.size());
                for (auto & w : words) putstr(w);
            } catch (const std::exception & e) {
                put32(1);
                putstr(e.what());
            }
            if (out.size() > (1 << 20)) flush();
        }
    } else if (mode == "decode") {
        uint32_t nt = 0;
        get32(nt);
        for (uint32_t i = 0; i < nt; i++) {
            std::string text = getstr();
            auto cpts = unicode_cpts_from_utf8(text);
            put32(cpts.size());
            for (auto c : cpts) put32(c);
            for (size_t off = 0; off < text.size(); off++) {
                size_t o = off;
                try {
                    uint32_t c = unicode_cpt_from_utf8(text, o);
                    put8(1); put32(c); put32(o);
                } catch (const std::exception &) {
                    put8(0); put32(0); put32(0);
                }
            }
            try {
                auto f = unicode_cpt_flags_from_utf8(text);
                put8(1); put16(f.as_uint());
            } catch (const std::exception &) {
                put8(0); put16(0);
            }
            if (out.size() > (1 << 20)) flush();
        }
    } else if (mode == "tables") {
        for (uint32_t c = 0; c < 0x110010; c++) {
            put16(unicode_cpt_flags_from_cpt(c).as_uint());
            put32(unicode_tolower(c));
            put32(unicode_cpts_normalize_nfd({c})[0]);
            put8(unicode_cpt_is_han(c));
            try {
                std::string s = unicode_cpt_to_utf8(c);
                put8(s.size()); out += s;
            } catch (const std::exception &) {
                put8(0);
            }
            if (out.size() > (1 << 20)) flush();
        }
        for (int b = 0; b < 256; b++) {
            std::string s = unicode_byte_to_utf8(b);
            put8(s.size()); out += s;
        }
    } else {
        fprintf(stderr, "unknown mode %s\n", mode.c_str());
        return 2;
    }
    flush();
    return 0;
}
