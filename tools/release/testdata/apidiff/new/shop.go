// Package shop is the API after a change: Charge takes a currency, Refund is
// gone, Options gains a field and loses a method.
package shop

type Options struct {
	Retries  int
	Currency string
}

func Charge(amount int, currency string) error { return nil }
