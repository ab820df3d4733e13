// Package stack reads what the CLI needs to know of a deployed linegate
// stack through CloudFormation: its resources, so a command can take a
// template's logical id (InteractiveDLQ) where AWS needs the physical one (a
// queue URL with CloudFormation's random suffix); its outputs (queue URLs,
// the webhook URL, the ops topic); and its parameters (how the functions get
// their LINE channel access token), so `linegate doctor --stack` and
// `linegate resend-held --stack` act on the same resources and credentials
// as the deployed functions.
package stack

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"

	"github.com/linegate/linegate/internal/config"
)

// ErrNoResource means the stack has no resource of that logical id.
var ErrNoResource = errors.New("no such resource in the stack")

// ErrNoStack means CloudFormation knows no stack of that name.
var ErrNoStack = errors.New("no such stack")

// API is the CloudFormation calls the package makes.
type API interface {
	DescribeStackResources(ctx context.Context, in *cloudformation.DescribeStackResourcesInput, optFns ...func(*cloudformation.Options)) (*cloudformation.DescribeStackResourcesOutput, error)
	DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, optFns ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
}

// Resource is one resource of a stack: its type and its physical id (what
// Ref returns: a queue's URL, a topic's ARN, a bus's or table's name).
type Resource struct {
	Type, PhysicalID string
}

// Stack is a deployed stack's resources by logical id, its outputs and its
// parameters.
type Stack struct {
	Name       string
	Resources  map[string]Resource
	Outputs    map[string]string
	Parameters map[string]string
}

// Describe reads the stack name's resources and parameters.
func Describe(ctx context.Context, cf API, name string) (*Stack, error) {
	res, err := cf.DescribeStackResources(ctx, &cloudformation.DescribeStackResourcesInput{StackName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("stack %s: describe resources: %w", name, err)
	}
	s := &Stack{Name: name, Resources: map[string]Resource{}, Outputs: map[string]string{}, Parameters: map[string]string{}}
	for _, r := range res.StackResources {
		s.Resources[aws.ToString(r.LogicalResourceId)] = Resource{Type: aws.ToString(r.ResourceType), PhysicalID: aws.ToString(r.PhysicalResourceId)}
	}
	st, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("stack %s: describe: %w", name, err)
	}
	if len(st.Stacks) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoStack, name)
	}
	for _, o := range st.Stacks[0].Outputs {
		s.Outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	for _, p := range st.Stacks[0].Parameters {
		s.Parameters[aws.ToString(p.ParameterKey)] = aws.ToString(p.ParameterValue)
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
	mode := s.Parameters["ChannelAccessTokenMode"]
	if mode == "" {
		mode = config.TokenLongLived
	}
	return config.LineAuth{
		Mode:          mode,
		AccessToken:   config.Secret{Param: s.Parameters["ChannelAccessTokenParameter"]},
		ChannelID:     s.Parameters["ChannelId"],
		ChannelSecret: config.Secret{Param: s.Parameters["ChannelSecretParameter"]},
		AssertionKey:  config.Secret{Param: s.Parameters["AssertionKeyParameter"]},
		TokenLife:     15 * time.Minute,
		APIBaseURL:    "https://api.line.me",
	}
}

// Physical returns the physical id of logicalID, or an error wrapping
// ErrNoResource that lists the stack's resources of the same type family.
func (s *Stack) Physical(logicalID string) (Resource, error) {
	if r, ok := s.Resources[logicalID]; ok {
		return r, nil
	}
	var ids []string
	for id := range s.Resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return Resource{}, fmt.Errorf("stack %s: %s: %w (it has %s)", s.Name, logicalID, ErrNoResource, strings.Join(ids, ", "))
}
