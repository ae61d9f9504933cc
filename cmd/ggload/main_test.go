package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/ggload/ggload/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.KillAll()
	os.Exit(code)
}

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	return out.String(), err
}

func TestDevicesJSON(t *testing.T) {
	rt := testenv.Runtime(t)
	out, err := runCLI(t, "devices", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep devicesReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Version != rt.Version() || len(rep.Devices) != len(rt.Devices()) {
		t.Fatalf("report %+v", rep)
	}
	var cpu *deviceInfo
	for i := range rep.Devices {
		if rep.Devices[i].Type == "CPU" {
			cpu = &rep.Devices[i]
		}
	}
	if cpu == nil || cpu.MemoryTotal == 0 || !cpu.Caps.BufferFromHostPtr || len(cpu.BufferTypes) == 0 || cpu.BufferTypes[0].Name != "CPU" || !cpu.BufferTypes[0].Host {
		t.Fatalf("CPU entry %+v", cpu)
	}
}

func TestDevicesText(t *testing.T) {
	testenv.Runtime(t)
	out, err := runCLI(t, "devices")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ggml 0.25.1", "CPU", "caps", "buffer type"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	if _, err := runCLI(t, "frobnicate"); err == nil || !strings.Contains(err.Error(), "frobnicate") {
		t.Fatalf("got %v", err)
	}
}
