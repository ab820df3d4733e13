// Package stackinfo reads what the CLI needs to know of a deployed linegate
// stack: its outputs (queue URLs, the webhook URL, the ops topic) and its
// parameters (how the functions get their LINE channel access token), so
// `linegate doctor --stack` and `linegate resend-held --stack` act on the
// same resources and credentials as the deployed functions.
package stackinfo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"

	"github.com/linegate/linegate/pkg/config"
)

// ErrNoStack is returned when CloudFormation knows no stack of that name.
var ErrNoStack = errors.New("stackinfo: no such stack")

// describer is the one CloudFormation call made.
type describer interface {
	DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, optFns ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
}

// Stack is a deployed stack's outputs and parameters.
type Stack struct {
	Name    string
	Outputs map[string]string
	Params  map[string]string
}

// Open describes the stack name.
func Open(ctx context.Context, cf describer, name string) (*Stack, error) {
	out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("describe stack %s: %w", name, err)
	}
	if len(out.Stacks) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoStack, name)
	}
	s := &Stack{Name: name, Outputs: map[string]string{}, Params: map[string]string{}}
	for _, o := range out.Stacks[0].Outputs {
		s.Outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	for _, p := range out.Stacks[0].Parameters {
		s.Params[aws.ToString(p.ParameterKey)] = aws.ToString(p.ParameterValue)
	}
	return s, nil
}

// Output returns an output, failing with the output's name when the stack
// has none (an older deployment).
func (s *Stack) Output(key string) (string, error) {
	v := s.Outputs[key]
	if v == "" {
		return "", fmt.Errorf("stack %s has no %s output: deploy the current template", s.Name, key)
	}
	return v, nil
}

// LineAuth is how the stack's functions get their channel access token, as
// its parameters say (SSM parameter names; the values stay in SSM).
func (s *Stack) LineAuth() config.LineAuth {
	mode := s.Params["ChannelAccessTokenMode"]
	if mode == "" {
		mode = config.TokenLongLived
	}
	return config.LineAuth{
		Mode:          mode,
		AccessToken:   config.Secret{Param: s.Params["ChannelAccessTokenParameter"]},
		ChannelID:     s.Params["ChannelId"],
		ChannelSecret: config.Secret{Param: s.Params["ChannelSecretParameter"]},
		AssertionKey:  config.Secret{Param: s.Params["AssertionKeyParameter"]},
		TokenLife:     15 * time.Minute,
		APIBaseURL:    "https://api.line.me",
	}
}
