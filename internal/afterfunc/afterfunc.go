// Package afterfunc keeps the functions that context.AfterFunc registers on a context
// type of idem's own. The context package hands them to a context with an AfterFunc
// method; on any other context that is not one of its own, it starts a goroutine per
// registration to wait for the end (pgx registers one per statement, net/http one per
// request).
package afterfunc

// Funcs is the functions registered on one context, until it ends. It has no lock of its
// own: its owner calls every method with the context's lock held, and calls what Take
// returned once that lock is released. The zero value is empty and ready for use.
type Funcs struct {
	list   []entry
	inline [1]entry // list's first backing array: one registration is the usual case
	nextID uint64
}

type entry struct {
	id uint64
	f  func()
}

// Add registers f and returns its id, for Remove.
func (fs *Funcs) Add(f func()) uint64 {
	fs.nextID++
	if fs.list == nil {
		fs.list = fs.inline[:0]
	}
	fs.list = append(fs.list, entry{id: fs.nextID, f: f})
	return fs.nextID
}

// Remove unregisters id and reports whether it was registered: false once Take took it
// (its function is called, or about to be) or after an earlier Remove.
func (fs *Funcs) Remove(id uint64) bool {
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

// Take empties fs and returns what was registered. Once its context has ended, the owner
// must not call Add again (context.AfterFunc on an ended context calls f at once).
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
