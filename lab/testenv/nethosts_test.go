package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A subnet that an interface already has an address in (hosts a killed
// test left behind) is passed over.
func TestFreeSubnetSkipsTaken(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to add an interface")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip not found (apt-get install iproute2)")
	}
	const link = "ggtfree0"
	if out, err := exec.Command("ip", "link", "add", link, "type", "veth", "peer", "name", link+"p").CombinedOutput(); err != nil {
		t.Skipf("cannot add a veth pair: %v %s", err, out)
	}
	defer exec.Command("ip", "link", "del", link).Run()
	if out, err := exec.Command("ip", "addr", "add", "10.157.1.1/24", "dev", link).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if got := freeSubnet(157); got == "10.157" {
		t.Fatalf("freeSubnet(157) = %s, which %s has an address in", got, link)
	}
	if got := freeSubnet(156); got != "10.156" && !taken(t, "10.156") {
		t.Fatalf("freeSubnet(156) = %s, though 10.156 is free", got)
	}
}

// taken reports whether an interface has an address in subnet s.
func taken(t *testing.T, s string) bool {
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(out), " "+s+".")
}
