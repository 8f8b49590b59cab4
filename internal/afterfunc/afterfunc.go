// Package afterfunc keeps the functions that context.AfterFunc registers on a context
// type of idem's own. The context package hands them to a context with an AfterFunc
// method; on any other context that is not one of its own, it starts a goroutine per
// registration to wait for the end (pgx registers one per statement, net/http one per
// request).
package afterfunc

import "sync"

// Funcs is the functions registered on one context, until it ends. It has no lock of its
// own: its owner calls Len and Take with the context's lock held (AfterFunc takes it), and
// calls what Take returned once that lock is released. The zero value is empty and ready
// for use.
type Funcs struct {
	list   []entry
	inline [1]entry // list's first backing array: one registration is the usual case
	nextID uint64
}

type entry struct {
	id uint64
	f  func()
}

// AfterFunc is the owner context's AfterFunc method, as context.AfterFunc calls it: it
// registers f under mu, unless ended (called under mu) reports the context ended, in which
// case f is called at once in its own goroutine. stop reports whether it kept f from being
// called: false once Take took it, or after an earlier stop.
func (fs *Funcs) AfterFunc(mu sync.Locker, ended func() bool, f func()) (stop func() bool) {
	mu.Lock()
	if ended() {
		mu.Unlock()
		go f()
		return func() bool { return false }
	}
	id := fs.add(f)
	mu.Unlock()
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		return fs.remove(id)
	}
}

func (fs *Funcs) add(f func()) uint64 {
	fs.nextID++
	if fs.list == nil {
		fs.list = fs.inline[:0]
	}
	fs.list = append(fs.list, entry{id: fs.nextID, f: f})
	return fs.nextID
}

func (fs *Funcs) remove(id uint64) bool {
	for i, e := range fs.list {
		if e.id == id {
			last := len(fs.list) - 1
			copy(fs.list[i:], fs.list[i+1:])
			fs.list[last] = entry{}
			fs.list = fs.list[:last]
			return true
		}
	}
	return false
}

// Len is how many functions are registered.
func (fs *Funcs) Len() int { return len(fs.list) }

// Take empties fs and returns what was registered. Once its context has ended, ended
// must report it to AfterFunc, which then registers nothing more.
func (fs *Funcs) Take() Taken {
	t := Taken(fs.list)
	fs.list = nil
	return t
}

// Taken is what Take returned.
type Taken []entry

// Call calls each function in this goroutine: the context package registers only its
// contexts' cancel functions, which do not block.
func (t Taken) Call() {
	for _, e := range t {
		e.f()
	}
}
