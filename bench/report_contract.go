// This file prints the contract floor resume (floorresume_contract.go)
// beside the floor resume: how much of Resume's cost over the floor is
// work its contract asks for (the body's SHA-256 checked, a settled record
// written per operation).

package main

// contractResume prints the contract floor resumes, warm and cold, and
// Resume's time over theirs, paired per round.
func (r *report) contractResume(rr *resumeResult) {
	if len(rr.contract) == 0 {
		return
	}
	r.printf("  contract the contract floor's records of the same POSTs (floor_contract.go), re-sent as the floor's\n")
	r.printf("           are, each body checked against its SHA-256, each settled by a delete and a settled record\n")
	r.contractPass("warm", "", rr.n, rr.contract, rr.warm, rr.floor)
	if len(rr.contractCold) > 0 {
		r.contractPass("cold", ", its pages dropped from the page cache first", rr.n, rr.contractCold, rr.cold, rr.floorCold)
	}
}

// contractPass prints the contract floor resumes of one kind (medians over
// rounds) and, paired per round, Resume's time over theirs and theirs over
// the floor resume's.
func (r *report) contractPass(kind, what string, n int, ps []sendRun, resumes []resumePass, floors []sendRun) {
	r.sendPass(kind, what, n, ps)
	m := min(len(ps), len(resumes), len(floors))
	resume, floor := make([]float64, m), make([]float64, m)
	for i := range m {
		resume[i] = resumes[i].done.Seconds() / ps[i].took.Seconds()
		floor[i] = ps[i].took.Seconds() / floors[i].took.Seconds()
	}
	r.ratio(kind+" Resume ÷ "+kind+" contract floor resume", resume)
	r.ratio(kind+" contract floor resume ÷ "+kind+" floor resume", floor)
}
