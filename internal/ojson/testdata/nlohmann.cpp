// The oracle of package ojson's tests: nlohmann's ordered_json, as the pin
// vendors it. Reads records from stdin, each a kind byte, a length (decimal,
// then '\n') and that many bytes; writes one answer per record:
//   'p' text: parse it; "OK\n" + dump(-1) + "\n" + dump(2) + "\n" + dump(0),
//             or "ERR\n" + what()
//   's' bytes: json(bytes): dump(-1) or its error, then dump_safe, then the
//             ensure_ascii replace form
//   'f' 16 hex digits: the double with those bits: dump(-1)
// Each answer ends with "\n\x1e\n".
#include <nlohmann/json.hpp>
#include <cinttypes>
#include <cstring>
#include <iostream>
#include <string>

using nlohmann::ordered_json;

static void answer(const std::string & s) { std::cout << s << "\n\x1e\n"; }

int main() {
    std::ios::sync_with_stdio(false);
    for (;;) {
        int kind = std::cin.get();
        if (kind == EOF) break;
        size_t n;
        std::cin >> n;
        std::cin.get();
        std::string data(n, '\0');
        std::cin.read(&data[0], n);
        std::string out;
        if (kind == 'p') {
            try {
                auto j = ordered_json::parse(data);
                out = "OK\n" + j.dump() + "\n" + j.dump(2) + "\n" + j.dump(0);
            } catch (const std::exception & e) {
                out = std::string("ERR\n") + e.what();
            }
        } else if (kind == 's') {
            ordered_json j = data;
            try {
                out = j.dump();
            } catch (const std::exception & e) {
                out = std::string("ERR ") + e.what();
            }
            out += "\n" + j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
            out += "\n" + j.dump(-1, ' ', true, ordered_json::error_handler_t::replace);
        } else if (kind == 'f') {
            uint64_t bits = std::stoull(data, nullptr, 16);
            double d;
            std::memcpy(&d, &bits, 8);
            out = ordered_json(d).dump();
        }
        answer(out);
    }
    return 0;
}
