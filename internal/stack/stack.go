// Package stack finds a deployed stack's resources through CloudFormation,
// so the CLI can take a template's logical id (InteractiveDLQ) where AWS
// needs the physical one (a queue URL with CloudFormation's random suffix).
package stack

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
)

// ErrNoResource means the stack has no resource of that logical id.
var ErrNoResource = errors.New("no such resource in the stack")

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

// Stack is a deployed stack's resources by logical id, and its parameters.
type Stack struct {
	Name       string
	Resources  map[string]Resource
	Parameters map[string]string
}

// Describe reads the stack name's resources and parameters.
func Describe(ctx context.Context, cf API, name string) (*Stack, error) {
	res, err := cf.DescribeStackResources(ctx, &cloudformation.DescribeStackResourcesInput{StackName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("stack %s: describe resources: %w", name, err)
	}
	s := &Stack{Name: name, Resources: map[string]Resource{}, Parameters: map[string]string{}}
	for _, r := range res.StackResources {
		s.Resources[aws.ToString(r.LogicalResourceId)] = Resource{Type: aws.ToString(r.ResourceType), PhysicalID: aws.ToString(r.PhysicalResourceId)}
	}
	st, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("stack %s: describe: %w", name, err)
	}
	for _, x := range st.Stacks {
		for _, p := range x.Parameters {
			s.Parameters[aws.ToString(p.ParameterKey)] = aws.ToString(p.ParameterValue)
		}
	}
	return s, nil
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
