// This file describes the machine for the report's header: CPUs, OS, Go, and
// the file system the journals live on (from /proc on Linux; elsewhere it
// says it does not know).

package main

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// cpuModel returns the first "model name" in /proc/cpuinfo, or "".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func machineLine() string {
	s := strconv.Itoa(runtime.NumCPU()) + " CPUs"
	if m := cpuModel(); m != "" {
		s += " (" + m + ")"
	}
	return s + ", GOMAXPROCS " + strconv.Itoa(runtime.GOMAXPROCS(0)) + ", " +
		runtime.GOOS + "/" + runtime.GOARCH + ", " + runtime.Version()
}

// fileSystem returns the device and type of the mount holding dir, from
// /proc/self/mountinfo, and whether it is a RAM file system (where fsync
// costs nothing and the figures mean little).
func fileSystem(dir string) (desc string, ram bool) {
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "unknown file system", false
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "unknown file system", false
	}
	defer f.Close()
	best, fstype, source := "", "", ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 2 {
			continue
		}
		mnt := unescapeMount(fields[4])
		if within(dir, mnt) && len(mnt) >= len(best) {
			best, fstype, source = mnt, tail[0], tail[1]
		}
	}
	if best == "" {
		return "unknown file system", false
	}
	return source + " (" + fstype + ", mounted on " + best + ")", fstype == "tmpfs" || fstype == "ramfs"
}

func within(dir, mnt string) bool {
	return mnt == "/" || dir == mnt || strings.HasPrefix(dir, mnt+"/")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
