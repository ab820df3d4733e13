//go:build !unix

package coldstart

import "os/exec"

// ownProcessGroup does nothing where process groups do not exist (the
// emulator runs on Linux only; this keeps the package building elsewhere).
func ownProcessGroup(*exec.Cmd) {}

// signalGroup kills the emulator process.
func signalGroup(cmd *exec.Cmd, _ bool) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
