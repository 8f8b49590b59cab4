// Package shop is the API before a change, for the API report's test.
package shop

type Options struct{ Retries int }

func Charge(amount int) error { return nil }

func Refund(id string) error { return nil }

func (o *Options) Check() error { return nil }
