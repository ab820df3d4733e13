package template

import (
	"errors"
	"os"
	"testing"
)

// FuzzParse feeds arbitrary documents to Parse: it must never panic, and
// every failure must wrap one of the package's sentinel errors.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile(templatePath); err == nil {
		f.Add(data)
	}
	f.Add([]byte(miniTemplate))
	f.Add([]byte("Resources:\n  A: {Type: AWS::SNS::Topic, Properties: {TopicName: !Sub '${AWS::StackName}-${!x}'}}\n"))
	f.Add([]byte("Resources:\n  Q: {Type: AWS::SQS::Queue, Properties: {RedrivePolicy: '{\"deadLetterTargetArn\": \"x\"}'}}\n"))
	f.Add([]byte(`{"Resources": {"A": {"Type": "AWS::SNS::Topic", "Properties": {"X": {"Fn::Cidr": ["10.0.0.0/8", 4, 20]}}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		top, err := Parse(data, nil)
		if err == nil {
			if top == nil {
				t.Fatal("nil topology without error")
			}
			return
		}
		if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrUnknownRef) && !errors.Is(err, ErrParameter) {
			t.Fatalf("error wraps no sentinel: %v", err)
		}
	})
}
