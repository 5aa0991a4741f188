package validation

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Level is a collection's validationLevel: which writes the validator
// checks.
type Level string

// Action is a collection's validationAction: what the server does with a
// write the validator rejects.
type Action string

const (
	// Strict checks every insert and update (MongoDB's default).
	Strict Level = "strict"
	// Moderate checks inserts, and updates of documents that were valid:
	// documents already invalid may be updated and stay invalid.
	Moderate Level = "moderate"
	// Error refuses the write (MongoDB's default).
	Error Action = "error"
	// Warn lets the write through and logs it on the server.
	Warn Action = "warn"
)

// filter returns v in the form the plan's server evaluates.
func (p plan) filter(v *Validator) (bson.D, error) {
	if p.FullSchema {
		return v.Document(), nil
	}
	return v.portable()
}

// rejectsFilter matches the documents validator rejects.
func rejectsFilter(validator bson.D) bson.D {
	return bson.D{{Key: "$nor", Value: bson.A{validator}}}
}

// listFilter selects the collection name in listCollections.
func listFilter(name string) bson.D { return bson.D{{Key: "name", Value: name}} }

// createCommand creates the collection name, with the validator where
// the plan takes it at create.
func (p plan) createCommand(name string, validator bson.D, level Level, action Action) bson.D {
	cmd := bson.D{{Key: "create", Value: name}}
	if p.CreateWithValidator {
		cmd = append(cmd, validatorOptions(validator, level, action)...)
	}
	return cmd
}

// collModCommand sets the validator of the existing collection name.
func collModCommand(name string, validator bson.D, level Level, action Action) bson.D {
	return append(bson.D{{Key: "collMod", Value: name}}, validatorOptions(validator, level, action)...)
}

func validatorOptions(validator bson.D, level Level, action Action) bson.D {
	return bson.D{
		{Key: "validator", Value: validator},
		{Key: "validationLevel", Value: string(level)},
		{Key: "validationAction", Value: string(action)},
	}
}
