// This file says where a directory can be fsynced (dirsync.go);
// dirsync_other.go is its counterpart elsewhere.

//go:build unix

package boltjournal

const dirSyncable = true
