//go:build unix

package coldstart

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup puts the emulator in a process group of its own, so Stop
// can end it together with the function process it started.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends SIGTERM (or SIGKILL) to the emulator's process group.
func signalGroup(cmd *exec.Cmd, kill bool) {
	if cmd.Process == nil {
		return
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	// The group id is the emulator's pid (Setpgid with Pgid 0).
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
