// This file reads the server child's CPU time, for the resume figure: a
// slower client also costs the server more per request (fewer requests
// waiting at each wake-up), and both share the machine's CPUs.

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux that Go supports.
const clockTick = 10 * time.Millisecond

// childCPU is the server child's user plus system CPU time so far, from
// /proc/PID/stat (fields 14 and 15); 0 if it cannot be read.
func childCPU(c *child) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.pid()))
	if err != nil {
		return 0
	}
	// The command name, field 2, is in parentheses and may hold any byte:
	// the fields after it follow the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * clockTick
}
